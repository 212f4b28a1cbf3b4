package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The embedder's calls that wait for a task on one of the worker's loops (P's fetch of finished sends,
 * the diagnostics): each waits at most the loop-call timeout, and never past the start of the worker's
 * {@code close()}, which may stop a loop with the task still queued. Thread-safe.
 */
final class LoopCalls {

    private final Duration timeout;
    private final BackgroundErrors errors;
    /** Completed when close() starts: a call waiting on a loop returns instead of waiting for a task close may drop. */
    private final CompletableFuture<Void> closing = new CompletableFuture<>();

    LoopCalls(Duration timeout, BackgroundErrors errors) {
        this.timeout = timeout;
        this.errors = errors;
    }

    /** The worker's close() started: waiting calls return now. */
    void closing() {
        closing.complete(null);
    }

    /**
     * Waits for a task posted to a loop.
     *
     * @throws RejectedExecutionException when closing began first
     */
    <T> T await(CompletableFuture<T> f) throws ExecutionException, TimeoutException, InterruptedException {
        CompletableFuture.anyOf(f, closing).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (!f.isDone()) {
            throw new RejectedExecutionException("the Mooncake connector worker is closing");
        }
        return f.get();
    }

    /** Runs {@code task} on {@code loop} and waits for it; empty (and the failure reported) when it did not run. */
    Set<String> onLoop(Executor loop, Supplier<Set<String>> task, String what) {
        try {
            return await(CompletableFuture.supplyAsync(task, loop));
        } catch (RejectedExecutionException e) {
            return Set.of(); // closing
        } catch (ExecutionException e) {
            errors.report(what, e.getCause());
            return Set.of();
        } catch (TimeoutException e) {
            errors.report(what, new IllegalStateException(what + " did not run within "
                    + timeout.toMillis() + " ms; is the loop blocked?", e));
            return Set.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Set.of();
        }
    }
}
