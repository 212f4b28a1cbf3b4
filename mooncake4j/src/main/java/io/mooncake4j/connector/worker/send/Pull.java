package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.send.Layerwise.Target;
import io.mooncake4j.connector.worker.send.PreparedShapes.Prepared;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledFuture;

/**
 * One D pull (one side-channel message) being served: vLLM's locals of {@code send_kv_to_decode}.
 * Written by {@link Waves} (and by {@link LayerwisePush} for its layer-wise targets) on the sender loop
 * only; {@link #done} is also read by the transfer pool before it writes.
 */
final class Pull {
    final byte[] identity;
    final ReplySink reply;
    final MooncakeXferMetadata meta;
    final PreparedRegions regions;
    final Prepared prepared;
    final int pairedRemoteRanks;
    final Map<String, SendBlockMeta> pending = new LinkedHashMap<>();
    final Map<String, int[][]> remoteBlocks = new LinkedHashMap<>();
    final Set<String> readyNow = new LinkedHashSet<>();
    /** D request ids this (re-sent) pull waits on another pull's outcome for ({@link RetriedPulls}). */
    final Set<String> followed = new LinkedHashSet<>();
    final String peer;
    final long bytes;
    /** When P last heard from or answered D on this pull (P's clock); the staleness rule counts from it. */
    long lastContact;
    ScheduledFuture<?> timeout;
    boolean busy;
    boolean waveScheduled;
    // read by the transfer pool before it writes: a wave of an ended pull is never written
    volatile boolean done;
    /** Layer-wise push: D request id → its layer-wise progress (requests pushed whole have none). */
    final Map<String, Target> lwTargets = new HashMap<>();
    /** Layer-wise writes of this pull on the pool or queued for its share. */
    int lwInflight;

    Pull(byte[] identity, ReplySink reply, MooncakeXferMetadata meta, Prepared prepared, int paired,
            String peer, long bytes) {
        this.peer = peer;
        this.bytes = bytes;
        this.identity = identity;
        this.reply = reply;
        this.meta = meta;
        this.prepared = prepared;
        this.regions = prepared.regions;
        this.pairedRemoteRanks = paired;
    }
}
