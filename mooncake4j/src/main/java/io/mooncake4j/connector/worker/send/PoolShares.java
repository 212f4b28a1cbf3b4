package io.mooncake4j.connector.worker.send;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Each D's share of the {@link TransferPool}: at most {@code perPeer} of its jobs (waves, layer-wise
 * writes) on the pool at once; the rest wait in its queue and each job that leaves hands its slot to
 * the next ({@link #release}). So one D with many pulls cannot take every transfer thread.
 *
 * <p><b>Threads.</b> Sender loop only, except {@link #queuedTotal()} (any thread).
 */
final class PoolShares {

    /** The sender's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    private final TransferPool pool;
    private final int perPeer;
    private final Map<String, Integer> inFlightByPeer = new HashMap<>();
    private final Map<String, ArrayDeque<Runnable>> queuedByPeer = new HashMap<>();
    private final LongAdder queued = new LongAdder();

    PoolShares(TransferPool pool, int perPeer) {
        this.pool = pool;
        this.perPeer = perPeer;
    }

    /** Jobs of {@code peer} on the pool now (or handed their slot). */
    int inFlight(String peer) {
        return inFlightByPeer.getOrDefault(peer, 0);
    }

    /** {@code peer} uses its whole share. */
    boolean full(String peer) {
        return inFlight(peer) >= perPeer;
    }

    /** Takes a slot of {@code peer}'s share: false (nothing taken) when it is full. */
    boolean take(String peer) {
        int inFlight = inFlight(peer);
        if (inFlight >= perPeer) {
            return false;
        }
        inFlightByPeer.put(peer, inFlight + 1);
        return true;
    }

    /** Queues {@code job} of {@code peer}, whose share is full: it runs when a slot is released. */
    void queue(String peer, Runnable job) {
        queued.increment();
        queuedByPeer.computeIfAbsent(peer, k -> new ArrayDeque<>()).addLast(job);
    }

    /** Hands {@code job} (with a slot {@link #take taken}) to the pool; a stopped pool runs {@code onRejected}. */
    void submit(String peer, Runnable job, Runnable onRejected) {
        try {
            pool.execute(job);
        } catch (RejectedExecutionException e) {
            release(peer);
            onRejected.run();
        }
    }

    /** A job of {@code peer} left the pool: its next queued job, if any, takes the slot. */
    void release(String peer) {
        ArrayDeque<Runnable> q = queuedByPeer.get(peer);
        Runnable next = q == null ? null : q.pollFirst();
        if (q != null && q.isEmpty()) {
            queuedByPeer.remove(peer);
        }
        if (next == null) {
            int n = inFlightByPeer.getOrDefault(peer, 1) - 1;
            if (n <= 0) {
                inFlightByPeer.remove(peer);
            } else {
                inFlightByPeer.put(peer, n);
            }
            return;
        }
        try {
            pool.execute(next); // the slot passes on
        } catch (RejectedExecutionException e) {
            LOG.debug("transfer pool stopped; dropping a queued wave to {}", peer);
        }
    }

    /** Jobs that waited for their peer's share, so far (any thread). */
    long queuedTotal() {
        return queued.sum();
    }
}
