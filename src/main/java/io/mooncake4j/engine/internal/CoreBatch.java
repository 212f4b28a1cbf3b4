package io.mooncake4j.engine.internal;

/**
 * A batch of the engine core: the shared {@link TaskBatch} state plus, per task, the index of the
 * transport (in the core's order) that holds it now, so that a retryable failure moves it to a
 * later one only (at most one attempt per installed transport). Thread-safe.
 */
final class CoreBatch extends TaskBatch {

    /** Transport index per task; written by the submitting thread before hand-over, then under the batch monitor. */
    final byte[] via;

    CoreBatch(long id, int capacity) {
        super(id, capacity);
        this.via = new byte[capacity];
    }

    /** See {@link TaskBatch#clearForReuse}. */
    boolean reset() {
        return clearForReuse();
    }
}
