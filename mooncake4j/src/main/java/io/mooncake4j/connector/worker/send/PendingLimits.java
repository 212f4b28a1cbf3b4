package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

/**
 * What D's pulls hold at P, counted against the {@link ChannelLimits}: the transfer ids pulls wait
 * for and their metadata bytes, per D and in all, and the placeholders of pulls that arrived before P's
 * scheduler. A new pull that would exceed one is refused ({@link #limitError}).
 *
 * <p><b>Threads.</b> Sender loop only.
 */
final class PendingLimits {

    private final ChannelLimits limits;
    private final long maxBytesPerPeer;
    private final long maxBytesTotal;
    private final Map<String, long[]> pendingByPeer = new HashMap<>(); // peer -> {transfer ids, metadata bytes}
    private long pendingTotal;
    private long pendingBytesTotal;
    private int placeholders;

    PendingLimits(ChannelLimits limits) {
        this.limits = limits;
        this.maxBytesPerPeer = 4 * limits.maxMetadataBytes();
        this.maxBytesTotal = 16 * limits.maxMetadataBytes();
    }

    /**
     * The limit a new pull of {@code peer} would exceed, or null; {@code held}: whether P holds a
     * transfer id already (a placeholder or a recorded request), so that the pull adds no placeholder.
     */
    String limitError(String peer, MooncakeXferMetadata meta, long bytes, Predicate<String> held) {
        int n = meta.reqBlocks().size();
        long[] mine = pendingByPeer.getOrDefault(peer, new long[2]);
        if (mine[0] + n > limits.maxPendingPerPeer()) {
            return String.format(Locale.ROOT, "P side-channel limit: D %s has %d transfer(s) pending at P and this "
                    + "pull names %d more, above the per-peer limit of %d; retry later", peer, mine[0], n,
                    limits.maxPendingPerPeer());
        }
        if (pendingTotal + n > limits.maxPendingTotal()) {
            return String.format(Locale.ROOT, "P side-channel limit: %d transfer(s) pending at P and this pull names "
                    + "%d more, above the limit of %d; retry later", pendingTotal, n, limits.maxPendingTotal());
        }
        if (mine[1] + bytes > maxBytesPerPeer || pendingBytesTotal + bytes > maxBytesTotal) {
            return String.format(Locale.ROOT, "P side-channel limit: pending pulls hold %d bytes of metadata for D %s "
                    + "(%d in all); this pull of %d bytes is above the limit of %d per peer, %d in all; retry later",
                    mine[1], peer, pendingBytesTotal, bytes, maxBytesPerPeer, maxBytesTotal);
        }
        int fresh = 0;
        Set<String> seen = new HashSet<>();
        for (MooncakeXferMetadata.ReqBlocks rb : meta.reqBlocks().values()) {
            if (!held.test(rb.transferId()) && seen.add(rb.transferId())) {
                fresh++;
            }
        }
        if (placeholders + fresh > limits.maxPendingTotal()) {
            return String.format(Locale.ROOT, "P side-channel limit: P holds %d placeholder(s) for transfers it has "
                    + "not scheduled and this pull names %d more, above the limit of %d; retry later", placeholders,
                    fresh, limits.maxPendingTotal());
        }
        return null;
    }

    /** Counts a new pull of {@code peer}, waiting for {@code ids} transfer ids and holding {@code bytes}. */
    void pend(String peer, int ids, long bytes) {
        long[] mine = pendingByPeer.computeIfAbsent(peer, k -> new long[2]);
        mine[0] += ids;
        mine[1] += bytes;
        pendingTotal += ids;
        pendingBytesTotal += bytes;
    }

    /** {@code n} pending transfer ids of a pull of {@code peer} are no longer waited for. */
    void unpend(String peer, int n) {
        long[] mine = pendingByPeer.get(peer);
        if (mine != null) {
            mine[0] -= n;
            pendingTotal -= n;
        }
    }

    /** A pull of {@code peer} ended: its {@code ids} ids still waited for and its {@code bytes} no longer count. */
    void unpendAll(String peer, int ids, long bytes) {
        unpend(peer, ids);
        long[] mine = pendingByPeer.get(peer);
        if (mine != null) {
            mine[1] -= bytes;
            pendingBytesTotal -= bytes;
            if (mine[0] <= 0 && mine[1] <= 0) {
                pendingByPeer.remove(peer);
            }
        }
    }

    /** P created a placeholder for a transfer its scheduler has not recorded yet. */
    void placeholderAdded() {
        placeholders++;
    }

    /** A placeholder was replaced by the recorded request, expired or was removed. */
    void placeholderGone() {
        placeholders--;
    }
}
