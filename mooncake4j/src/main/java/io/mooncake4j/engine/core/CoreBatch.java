package io.mooncake4j.engine.core;

/**
 * A batch of the engine core: the shared {@link TaskBatch} state plus, per task, the index of the
 * transport (in the core's order) that holds it now, so that a retryable failure moves it to a
 * later one only (at most one attempt per installed transport). Thread-safe.
 */
final class CoreBatch extends TaskBatch {

    /** Transport index per task; written by the submitting thread before hand-over, then under the batch monitor. */
    final byte[] via;
    /**
     * The registered local buffer of each routed task (null for a task the last routing dropped);
     * written by the submitting thread before hand-over, read by the transport holding the task.
     * Kept per task so that routing allocates nothing per descriptor.
     */
    final io.mooncake4j.engine.spi.LocalBuffer[] localBuf;

    CoreBatch(long id, int capacity) {
        super(id, capacity);
        this.via = new byte[capacity];
        this.localBuf = new io.mooncake4j.engine.spi.LocalBuffer[capacity];
    }

    /** See {@link TaskBatch#clearForReuse}. */
    boolean reset() {
        return clearForReuse();
    }
}
