package io.mooncake4j.connector.worker.send;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the ROUTER's owner must do before the ROUTER's port closes (implemented by {@link KvSender}):
 * D fails a pull at once when P's port refuses it after a disconnect, so no write of P may still land in
 * D's blocks by then. Used when the ROUTER is recreated (watchdog) and at shutdown.
 */
public interface Quiesce {

    /** Ends every pull being served: none of their waves starts after this completes. */
    CompletableFuture<Void> abandonAllPulls(String reason);

    /** No write of an ended pull is still running. */
    boolean writesIdle();

    /**
     * Ends every pull of {@code q} (null: nothing to end) and waits (at most {@code waitMs}) for their
     * running writes. Returns whether it got there; when not, the failure is logged and the caller closes
     * the port anyway.
     */
    static boolean await(Quiesce q, String reason, long waitMs) {
        if (q == null) {
            return true;
        }
        Logger log = LoggerFactory.getLogger(SenderListener.class);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        try {
            q.abandonAllPulls(reason).get(waitMs, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
            log.error("could not abandon the side-channel pulls before closing the ROUTER: {}", e.toString());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        while (!q.writesIdle()) {
            if (System.nanoTime() - deadline > 0) {
                log.error("a write of an abandoned pull still runs after {} ms; closing the ROUTER anyway", waitMs);
                return false;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5)); // bounded wait for the transfer pool
        }
        return true;
    }
}
