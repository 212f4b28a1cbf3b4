package io.mooncake4j.connector.worker.loop;

import java.util.Locale;

/**
 * The side channel's bounds as the send and receive paths enforce them: what a side-channel peer can
 * make a worker spend. The embedder sets them as {@code io.mooncake4j.connector.worker.SideChannelLimits}
 * (exported; it checks its bounds here and converts to this record), so that these packages need nothing
 * from the worker's package. Immutable; the meaning and defaults of each bound are
 * {@code SideChannelLimits}'.
 *
 * @param maxMetadataBytes    largest frame P's ROUTER accepts
 * @param maxResponseBytes    largest frame D's DEALERs accept from a P worker
 * @param maxPendingPerPeer   transfer ids one D may have P hold waiting for readiness at once
 * @param maxPendingTotal     the same over all peers, and the most placeholders P keeps
 * @param maxTransfersPerPeer transfer-pool threads one D may occupy at once; 0 means half of {@code num_workers}
 */
public record ChannelLimits(long maxMetadataBytes, long maxResponseBytes, int maxPendingPerPeer, int maxPendingTotal,
        int maxTransfersPerPeer) {

    public static final long DEFAULT_MAX_METADATA_BYTES = 16L << 20;
    public static final long DEFAULT_MAX_RESPONSE_BYTES = 4L << 20;
    public static final int DEFAULT_MAX_PENDING_PER_PEER = 4096;
    public static final int DEFAULT_MAX_PENDING_TOTAL = 65536;

    /** The defaults above. */
    public static final ChannelLimits DEFAULTS = new ChannelLimits(DEFAULT_MAX_METADATA_BYTES,
            DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_PENDING_PER_PEER, DEFAULT_MAX_PENDING_TOTAL, 0);

    /**
     * Checks the bounds.
     *
     * @throws IllegalArgumentException when a bound is not positive (the transfer cap: negative)
     */
    public ChannelLimits {
        positive("maxMetadataBytes", maxMetadataBytes);
        positive("maxResponseBytes", maxResponseBytes);
        positive("maxPendingPerPeer", maxPendingPerPeer);
        positive("maxPendingTotal", maxPendingTotal);
        if (maxTransfersPerPeer < 0) {
            throw new IllegalArgumentException("maxTransfersPerPeer must be >= 0 (0 = half of num_workers), got "
                    + maxTransfersPerPeer);
        }
        if (maxPendingPerPeer > maxPendingTotal) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "maxPendingPerPeer (%d) must not exceed maxPendingTotal (%d)", maxPendingPerPeer, maxPendingTotal));
        }
    }

    private static void positive(String name, long v) {
        if (v <= 0) {
            throw new IllegalArgumentException(name + " must be positive, got " + v);
        }
    }

    /**
     * The transfer-pool share of one peer (a D worker): how many of P's transfer threads its writes may
     * occupy at once.
     *
     * @param numWorkers the transfer pool's threads ({@code num_workers})
     * @return {@code maxTransfersPerPeer} when set, else half the pool (at least 1), never above the pool
     */
    public int transfersPerPeer(int numWorkers) {
        int share = maxTransfersPerPeer > 0 ? maxTransfersPerPeer : Math.max(1, numWorkers / 2);
        return Math.min(share, numWorkers);
    }

    /** {@return these limits with {@code maxMetadataBytes = v}} */
    public ChannelLimits withMaxMetadataBytes(long v) {
        return new ChannelLimits(v, maxResponseBytes, maxPendingPerPeer, maxPendingTotal, maxTransfersPerPeer);
    }

    /** {@return these limits with {@code maxResponseBytes = v}} */
    public ChannelLimits withMaxResponseBytes(long v) {
        return new ChannelLimits(maxMetadataBytes, v, maxPendingPerPeer, maxPendingTotal, maxTransfersPerPeer);
    }
}
