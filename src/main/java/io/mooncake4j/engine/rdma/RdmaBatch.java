package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.internal.TaskBatch;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * One batch of tasks in parallel primitive arrays. A task is split into slices; it ends
 * COMPLETED when every slice succeeded, FAILED when any slice failed after its retries (Mooncake:
 * {@code success_slices + failed_slices == slice_count}). States change once, by CAS.
 * {@link #inFlight} counts work requests posted and not yet completed, so a timed-out or closing
 * owner can wait until no NIC touches the batch's memory. Thread-safe.
 */
final class RdmaBatch extends TaskBatch {

    private static final VarHandle INTS = MethodHandles.arrayElementVarHandle(int[].class);
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);

    private final int[] slicesLeft;
    private final int[] sliceFailed;
    private final long[] transferred;
    /** Posted work requests of this batch not yet completed. */
    final AtomicInteger inFlight = new AtomicInteger();

    RdmaBatch(long id, int capacity) {
        super(id, capacity);
        this.slicesLeft = new int[capacity];
        this.sliceFailed = new int[capacity];
        this.transferred = new long[capacity];
    }

    /** Sets the number of slices of task {@code i} before the first is dispatched. */
    void expectSlices(int i, int n) {
        INTS.setVolatile(slicesLeft, i, n);
    }

    /** One slice of task {@code i} ended; the last one decides the task's state. */
    void sliceDone(int i, boolean ok, int bytes) {
        if (ok) {
            LONGS.getAndAdd(transferred, i, (long) bytes);
        } else {
            INTS.setVolatile(sliceFailed, i, 1);
        }
        if ((int) INTS.getAndAdd(slicesLeft, i, -1) == 1) {
            finish(i, (int) INTS.getVolatile(sliceFailed, i) == 0 ? COMPLETED : FAILED);
        }
    }

    @Override
    protected long transferredBytes(int i) {
        return (long) LONGS.getVolatile(transferred, i);
    }

    /** Waits until every task is terminal or the deadline passes; true when all are terminal. */
    boolean await(long deadlineNanos) {
        return await(deadlineNanos, 20_000_000L);
    }

    /** Waits until no work request of this batch is outstanding; true when none is. */
    boolean awaitQuiet(long deadlineNanos) {
        while (inFlight.get() > 0) {
            if (System.nanoTime() - deadlineNanos > 0) {
                return false;
            }
            LockSupport.parkNanos(this, 200_000L);
        }
        return true;
    }
}
