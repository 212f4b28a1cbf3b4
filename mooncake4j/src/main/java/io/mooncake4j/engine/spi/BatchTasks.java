package io.mooncake4j.engine.spi;

/**
 * The tasks of one batch of the core, as a transport sees them: what each task moves and the one
 * way to end it. The core implements it; a {@link SliceGroup} is a view of some of its tasks
 * ({@link SliceGroup#batch()}, {@link SliceGroup#task(int)}).
 *
 * <p>A transport whose worker threads already speak in batch tasks (tcp's lanes) may end a task it
 * holds here with {@link #complete} or {@link #fail}, exactly as through its {@link SliceGroup}: a
 * failure goes through the core, which moves a retryable one to the next capable transport in its
 * order, so no transport can skip the fallback and none needs a particular place in the order.
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

    /**
     * Task {@code task} failed on transport {@code transport} (its {@link Transport#name()}): as
     * {@link SliceGroup#fail}, the core retries a retryable failure on the next capable transport
     * and ends the task otherwise. A report from a transport that no longer holds the task (it
     * already moved on) is ignored.
     *
     * @return false when the task had already ended or moved on (nothing changed)
     */
    boolean fail(int task, String transport, SliceFailure failure, String why);
}
