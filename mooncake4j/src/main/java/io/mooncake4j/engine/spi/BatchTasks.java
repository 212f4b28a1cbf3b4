package io.mooncake4j.engine.spi;

/**
 * The tasks of one batch of the core, as a transport sees them: what each task moves and the one
 * way to end it. The core implements it; a {@link SliceGroup} is a view of some of its tasks
 * ({@link SliceGroup#batch()}, {@link SliceGroup#task(int)}).
 *
 * <p>A transport whose worker threads already speak in batch tasks (tcp's lanes) may end a task
 * here directly with {@link #complete} or {@link #fail}: that is {@link SliceGroup#complete} /
 * {@link SliceGroup#fail} minus the fallback, so the core puts such a transport last in its order.
 * Each task ends exactly once; later calls for an ended task return false and change nothing.
 *
 * <p>Thread-safe: tasks are ended from any thread; the per-task fields are written by the
 * submitting thread before the hand-over and not changed while a transport holds the task.
 */
public interface BatchTasks {

    /** The batch's id (for logs; -1 for the batch of a synchronous call). */
    long id();

    /**
     * Whether the batch was given up (the caller timed out or the engine is closing): its waiting
     * tasks are already failed, and no transport thread may touch its memory again.
     */
    boolean aborted();

    /** Whether task {@code task} writes local memory to the peer (else it reads the peer's into local memory). */
    boolean isWrite(int task);

    /** The local address of task {@code task}. */
    long local(int task);

    /** The peer's absolute address of task {@code task}. */
    long remote(int task);

    /** Bytes of task {@code task}. */
    long length(int task);

    /** Whether task {@code task} has ended (completed, failed or timed out). */
    boolean isTerminal(int task);

    /** Ends task {@code task} as applied at the target; false when it had already ended. */
    boolean complete(int task);

    /** Ends task {@code task} as failed, with no fallback; false when it had already ended. */
    boolean fail(int task);
}
