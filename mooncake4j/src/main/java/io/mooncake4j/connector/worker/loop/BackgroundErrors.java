package io.mooncake4j.connector.worker.loop;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;

/**
 * Where the worker's background work (sender loop, transfer pool, receiver loop, pull I/O)
 * routes an unexpected exception: counted always, logged at ERROR once per distinct
 * (place, type, message), later occurrences at DEBUG. Never rethrows, never drops. Thread-safe.
 */
public final class BackgroundErrors {

    private static final int MAX_DISTINCT = 1024;

    private final Logger log;
    private final LongAdder count = new LongAdder();
    private final Map<String, Boolean> seen = new ConcurrentHashMap<>();

    public BackgroundErrors(Logger log) {
        this.log = log;
    }

    public void report(String where, Throwable e) {
        count.increment();
        String key = where + ':' + e.getClass().getName() + ':' + e.getMessage();
        if (seen.size() < MAX_DISTINCT && seen.putIfAbsent(key, Boolean.TRUE) == null) {
            log.error("Error in Mooncake {} (further occurrences are counted, not logged): {}", where, e.toString(), e);
        } else {
            log.debug("Error in Mooncake {} (repeated): {}", where, e.toString());
        }
    }

    /** Wraps {@code task} so that anything it throws is reported here. */
    public Runnable guarded(String where, Runnable task) {
        return () -> {
            try {
                task.run();
            } catch (RuntimeException | Error e) {
                report(where, e);
            }
        };
    }

    public long count() {
        return count.sum();
    }
}
