package io.mooncake4j.connector.worker;

import java.util.Locale;

/**
 * Bounds on what a side-channel peer can make a worker spend (a peer is not trusted). Immutable; see
 * {@code docs/reliability.md} ("Side channel") for how each default was sized.
 *
 * @param maxMetadataBytes     largest frame P's ROUTER accepts ({@code ZMQ_MAXMSGSIZE}); a peer that declares a
 *                             larger frame is disconnected before anything is allocated. Default 16 MiB.
 * @param maxResponseBytes     largest frame D's DEALERs accept from a P worker. Default 4 MiB.
 * @param maxPendingPerPeer    transfer ids one D (keyed by its {@code remote_hostname:remote_port}) may have P hold
 *                             waiting for readiness at once, over all its pulls. Default 4096.
 * @param maxPendingTotal      the same over all peers, and the most placeholders (transfer ids D named before P's
 *                             scheduler did) P keeps. Default 65536.
 * @param maxTransfersPerPeer  transfer-pool threads one D may occupy at once; 0 means half of {@code num_workers}
 *                             (at least 1). Default 0.
 */
public record SideChannelLimits(long maxMetadataBytes, long maxResponseBytes, int maxPendingPerPeer,
        int maxPendingTotal, int maxTransfersPerPeer) {

    public static final long DEFAULT_MAX_METADATA_BYTES = 16L << 20;
    public static final long DEFAULT_MAX_RESPONSE_BYTES = 4L << 20;
    public static final int DEFAULT_MAX_PENDING_PER_PEER = 4096;
    public static final int DEFAULT_MAX_PENDING_TOTAL = 65536;

    /** The defaults above. */
    public static final SideChannelLimits DEFAULTS = new SideChannelLimits(DEFAULT_MAX_METADATA_BYTES,
            DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_PENDING_PER_PEER, DEFAULT_MAX_PENDING_TOTAL, 0);

    /**
     * Checks the bounds.
     *
     * @throws IllegalArgumentException when a bound is not positive (the transfer cap: negative)
     */
    public SideChannelLimits {
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

    /**
     * {@return these limits with {@code maxMetadataBytes = v}}
     *
     * @param v the largest side-channel message P reads, in bytes
     */
    public SideChannelLimits withMaxMetadataBytes(long v) {
        return new SideChannelLimits(v, maxResponseBytes, maxPendingPerPeer, maxPendingTotal, maxTransfersPerPeer);
    }

    /**
     * {@return these limits with {@code maxResponseBytes = v}}
     *
     * @param v the largest response D reads, in bytes
     */
    public SideChannelLimits withMaxResponseBytes(long v) {
        return new SideChannelLimits(maxMetadataBytes, v, maxPendingPerPeer, maxPendingTotal, maxTransfersPerPeer);
    }

    /**
     * {@return these limits with the pending bounds}
     *
     * @param perPeer pending pulls and placeholders per D peer
     * @param total   pending pulls and placeholders over all peers
     */
    public SideChannelLimits withMaxPending(int perPeer, int total) {
        return new SideChannelLimits(maxMetadataBytes, maxResponseBytes, perPeer, total, maxTransfersPerPeer);
    }

    /**
     * {@return these limits with {@code maxTransfersPerPeer = v}}
     *
     * @param v the transfer-pool threads one D may use at once (0: half of {@code num_workers})
     */
    public SideChannelLimits withMaxTransfersPerPeer(int v) {
        return new SideChannelLimits(maxMetadataBytes, maxResponseBytes, maxPendingPerPeer, maxPendingTotal, v);
    }
}
