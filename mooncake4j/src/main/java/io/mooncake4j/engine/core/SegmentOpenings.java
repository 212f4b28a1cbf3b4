package io.mooncake4j.engine.core;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.ToLongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The descriptor fetches of {@code openSegment} in flight, one per name: the first caller for a
 * name runs the fetch with no engine-wide lock held, later callers for the same name wait for its
 * result (bounded), and fetches for different names run side by side, so one unresponsive peer
 * stalls only the callers that asked for it. A failed fetch is not remembered: the next call
 * tries again. Thread-safe; the per-name future is the only hand-over.
 */
public final class SegmentOpenings {

    private static final Logger LOG = LoggerFactory.getLogger(SegmentOpenings.class);

    private final Map<String, CompletableFuture<Long>> opening = new ConcurrentHashMap<>();
    private final long waitMillis;

    /** {@code waitMillis} bounds how long a caller waits for another caller's fetch of the same name. */
    public SegmentOpenings(long waitMillis) {
        this.waitMillis = waitMillis;
    }

    /**
     * Runs {@code fetch} for {@code name} unless a fetch of it is already running, then shares
     * its result: a segment id, or -1. An exception from {@code fetch} reaches its own caller;
     * waiters get -1.
     */
    public long open(String name, ToLongFunction<String> fetch) {
        CompletableFuture<Long> mine = new CompletableFuture<>();
        CompletableFuture<Long> running = opening.putIfAbsent(name, mine);
        if (running != null) {
            return await(name, running);
        }
        long result = -1;
        try {
            result = fetch.applyAsLong(name);
            return result;
        } finally {
            opening.remove(name, mine);
            mine.complete(result);
        }
    }

    /** Fetches in flight now (for tests). */
    public int inFlight() {
        return opening.size();
    }

    private long await(String name, CompletableFuture<Long> f) {
        try {
            return f.get(waitMillis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        } catch (ExecutionException | TimeoutException e) {
            LOG.warn("openSegment({}) failed: {}", name, e.toString());
            return -1;
        }
    }
}
