package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.internal.TaskBatch;

/**
 * One batch of TCP transfer tasks: the shared {@link TaskBatch} state, plus reuse of a finished
 * batch by the next synchronous call of the same thread. Thread-safe.
 */
final class Batch extends TaskBatch {

    Batch(long id, int capacity) {
        super(id, capacity);
    }

    /**
     * Makes a batch whose tasks all completed reusable for the next synchronous call of the same
     * thread: every task was then claimed and completed by a lane, so no queued work or ring entry
     * refers to it any more. Returns false (do not reuse) otherwise.
     */
    boolean reset() {
        return clearForReuse();
    }

    /** Waits until every task is terminal or the deadline passes; true when all are terminal. */
    boolean await(long deadlineNanos) {
        return await(deadlineNanos, 50_000_000L);
    }
}
