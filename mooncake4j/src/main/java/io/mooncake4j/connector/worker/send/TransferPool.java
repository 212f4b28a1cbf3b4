package io.mooncake4j.connector.worker.send;

import io.mooncake4j.internal.sys.ThreadTuning;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * P's transfer pool: the {@code mooncake-p-xfer-<n>} threads that run the blocking writes of the send
 * path, and the count of writes between their abandonment check and their end ({@link #writesIdle()},
 * what a reset or close waits for). It owns its threads; which peer may use how many of them is the
 * sender loop's business ({@link PoolShares}).
 *
 * <p><b>Threads.</b> Everything here may be called from any thread.
 */
final class TransferPool {

    /** The sender's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    private final ThreadPoolExecutor executor;
    /** Jobs between their abandonment check and the end of their write. */
    private final AtomicInteger writing = new AtomicInteger();
    private final AtomicBoolean niceRefusedLogged = new AtomicBoolean();

    /**
     * {@code numWorkers} threads; {@code transferThreadNice > 0} makes each set that nice value when it
     * starts (and so the engine threads it starts: Linux threads inherit it), warned once where the
     * system refuses.
     */
    TransferPool(String engineLabel, int numWorkers, int transferThreadNice) {
        AtomicInteger n = new AtomicInteger();
        this.executor = new ThreadPoolExecutor(numWorkers, numWorkers, 0, TimeUnit.MILLISECONDS,
                new LinkedBlockingQueue<>(), r -> {
                    Runnable body = transferThreadNice == 0 ? r : () -> {
                        if (!ThreadTuning.setNice(transferThreadNice) && !niceRefusedLogged.getAndSet(true)) {
                            LOG.warn("{}: transfer_thread_nice {}: the system refused to set it (not Linux, or no "
                                    + "native access); P's transfer threads keep their priority", engineLabel,
                                    transferThreadNice);
                        }
                        r.run();
                    };
                    Thread t = new Thread(body, "mooncake-p-xfer-" + n.getAndIncrement());
                    t.setDaemon(true);
                    return t;
                });
    }

    /** Runs {@code job} on a pool thread. */
    void execute(Runnable job) throws RejectedExecutionException {
        executor.execute(job);
    }

    /** A job passed its abandonment check and writes now (pool thread); {@link #writeEnded()} follows. */
    void writeStarted() {
        writing.incrementAndGet();
    }

    void writeEnded() {
        writing.decrementAndGet();
    }

    /** No job is between its abandonment check and the end of its write. */
    boolean writesIdle() {
        return writing.get() == 0;
    }

    /** Stops the pool; in-flight transfers are not cancelled (spec §15 #15), waited for briefly. */
    void close() {
        executor.shutdown();
        try {
            if (!executor.awaitTermination(5, TimeUnit.SECONDS)) {
                executor.shutdownNow();
                if (!executor.awaitTermination(5, TimeUnit.SECONDS)) {
                    LOG.error("mooncake-p-xfer threads did not stop within 10 s (a transfer is blocked)");
                }
            }
        } catch (InterruptedException e) {
            executor.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
