package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.loop.ChannelLimits;

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

    public static final long DEFAULT_MAX_METADATA_BYTES = ChannelLimits.DEFAULT_MAX_METADATA_BYTES;
    public static final long DEFAULT_MAX_RESPONSE_BYTES = ChannelLimits.DEFAULT_MAX_RESPONSE_BYTES;
    public static final int DEFAULT_MAX_PENDING_PER_PEER = ChannelLimits.DEFAULT_MAX_PENDING_PER_PEER;
    public static final int DEFAULT_MAX_PENDING_TOTAL = ChannelLimits.DEFAULT_MAX_PENDING_TOTAL;

    /** The defaults above. */
    public static final SideChannelLimits DEFAULTS = new SideChannelLimits(DEFAULT_MAX_METADATA_BYTES,
            DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_PENDING_PER_PEER, DEFAULT_MAX_PENDING_TOTAL, 0);

    /**
     * Checks the bounds.
     *
     * @throws IllegalArgumentException when a bound is not positive (the transfer cap: negative)
     */
    public SideChannelLimits {
        // the checks are those of ChannelLimits, the send and receive paths' copy of these bounds
        new ChannelLimits(maxMetadataBytes, maxResponseBytes, maxPendingPerPeer, maxPendingTotal, maxTransfersPerPeer);
    }

    /** These limits as the send and receive paths read them. */
    ChannelLimits channel() {
        return new ChannelLimits(maxMetadataBytes, maxResponseBytes, maxPendingPerPeer, maxPendingTotal,
                maxTransfersPerPeer);
    }

    /**
     * The transfer-pool share of one peer (a D worker): how many of P's transfer threads its writes may
     * occupy at once.
     *
     * @param numWorkers the transfer pool's threads ({@code num_workers})
     * @return {@code maxTransfersPerPeer} when set, else half the pool (at least 1), never above the pool
     */
    public int transfersPerPeer(int numWorkers) {
        return channel().transfersPerPeer(numWorkers);
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
