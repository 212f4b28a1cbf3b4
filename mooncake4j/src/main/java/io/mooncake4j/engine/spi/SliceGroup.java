package io.mooncake4j.engine.spi;

/**
 * Slices of one batch bound for one peer, handed to {@link Transport#submit} as indexed views (no
 * per-slice allocation). Slice {@code i} moves {@link #length(int)} bytes between local address
 * {@link #local(int)} and the peer's absolute address {@link #remote(int)}: {@link #isWrite(int)}
 * local → remote, otherwise remote → local. Both ranges were checked by the core: the local one
 * lies in a registered buffer, the remote one in a buffer the peer's descriptor advertises.
 *
 * <p>The transport ends every slice exactly once, from any thread, with {@link #complete} or
 * {@link #fail}; later calls for the same slice are ignored. Once {@link #aborted()} is true
 * (the caller timed out or the engine is closing) it must not touch the slice's memory again and
 * should fail what it still holds.
 *
 * <p>Every group is a view of tasks of one core batch ({@link #batch()}, {@link #task(int)}): a
 * transport whose worker threads already speak in batch tasks (tcp's lanes) may end a task on the
 * batch directly ({@link BatchTasks#complete}, {@link BatchTasks#fail}), which does what
 * {@link #complete}/{@link #fail} do, fallback included.
 */
public interface SliceGroup {

    /** Slices in this group. */
    int size();

    boolean isWrite(int i);

    long local(int i);

    long remote(int i);

    long length(int i);

    /** The registered local buffer slice {@code i} lies in. */
    LocalBuffer localBuffer(int i);

    /** Slice {@code i} was applied at the target ({@code length(i)} bytes moved). */
    void complete(int i);

    /**
     * Slice {@code i} failed; {@code why} is a short message for the log (the core logs the first
     * failure per peer and transport, and counts the rest).
     */
    void fail(int i, SliceFailure failure, String why);

    /** Whether the batch was given up; see the class comment. */
    boolean aborted();

    /** The core batch these slices belong to. */
    BatchTasks batch();

    /** The batch task index of slice {@code i}. */
    int task(int i);

    /** Whether slice {@code i} is task {@code task(0) + i} for every {@code i} (a contiguous run of tasks). */
    boolean contiguous();
}
