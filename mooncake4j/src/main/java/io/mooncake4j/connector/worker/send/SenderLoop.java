package io.mooncake4j.connector.worker.send;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sender loop: the one thread ({@code mooncake-p-sender-0}) that owns all of the send path's
 * state ({@link KvSender} and its parts), as a single-thread scheduled executor. It creates, starts
 * and stops its thread; others hand it work through {@link #executor()}.
 *
 * <p><b>Threads.</b> {@link #executor()} and {@link #stop(long)} may be called from any thread.
 */
final class SenderLoop {

    /** The listener's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(SenderListener.class);
    static final String THREAD_NAME = "mooncake-p-sender-0";

    private final ScheduledThreadPoolExecutor executor;
    private final AtomicReference<Thread> thread = new AtomicReference<>();

    /** Starts the loop's thread (a daemon). */
    SenderLoop() {
        ScheduledThreadPoolExecutor e = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, THREAD_NAME);
            t.setDaemon(true);
            thread.set(t);
            return t;
        });
        e.setRemoveOnCancelPolicy(true);
        e.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        e.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
        e.prestartAllCoreThreads();
        this.executor = e;
    }

    ScheduledExecutorService executor() {
        return executor;
    }

    /**
     * Stops the loop: queued tasks still run, delayed ones are dropped; after {@code joinMs} a blocked
     * task is interrupted, and after as long again it is reported. Waits up to {@code joinMs} more for
     * the thread to exit. Idempotent.
     */
    void stop(long joinMs) {
        executor.shutdown();
        try {
            if (!executor.awaitTermination(joinMs, TimeUnit.MILLISECONDS)) {
                executor.shutdownNow();
                if (!executor.awaitTermination(joinMs, TimeUnit.MILLISECONDS)) {
                    LOG.error("{} did not stop within {} ms (a handler is blocked)", THREAD_NAME, 2 * joinMs);
                }
            }
            if (executor.isTerminated() && !join(thread.get(), joinMs)) {
                LOG.error("{} did not exit within {} ms", THREAD_NAME, joinMs);
            }
        } catch (InterruptedException e) {
            executor.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }

    private static boolean join(Thread t, long joinMs) {
        if (t == null) {
            return true;
        }
        try {
            t.join(joinMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !t.isAlive();
    }
}
