package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The RDMA transport's state for one {@link SliceGroup} the core handed it: each group slice (a
 * task) is cut into work-request slices ({@link Slice}); it ends complete when every one succeeded,
 * failed when any failed after its retries (Mooncake: {@code success_slices + failed_slices ==
 * slice_count}), as {@link SliceFailure#UNREACHABLE} when the failures were connection bring-ups,
 * so that the core retries it on the next transport. {@link #inFlight} counts work requests posted
 * and not yet completed, so a timed-out or closing owner can wait until no NIC touches the memory.
 * Thread-safe.
 */
final class RdmaBatch {

    private static final VarHandle INTS = MethodHandles.arrayElementVarHandle(int[].class);
    private static final int OK = 0;
    private static final int FAILED = 1;
    private static final int UNREACHABLE = 2;

    final SliceGroup group;
    private final int[] slicesLeft;
    private final int[] failure;
    private final AtomicInteger open;
    private final Runnable onDone;
    /** Posted work requests of this group not yet completed. */
    final AtomicInteger inFlight = new AtomicInteger();
    /** Set when the transport is uninstalled: nothing more is posted. */
    volatile boolean abandoned;

    /** {@code onDone} runs once every slice of the group ended. */
    RdmaBatch(SliceGroup group, Runnable onDone) {
        this.group = group;
        int n = group.size();
        this.slicesLeft = new int[n];
        this.failure = new int[n];
        this.open = new AtomicInteger(n);
        this.onDone = onDone;
    }

    /** Whether nothing more may be posted for this group. */
    boolean aborted() {
        return abandoned || group.aborted();
    }

    /** Sets the number of work-request slices of group slice {@code i} before the first is dispatched. */
    void expectSlices(int i, int n) {
        INTS.setVolatile(slicesLeft, i, n);
    }

    /** Group slice {@code i} ended before any work request (the count is then 0). */
    void endNow(int i, boolean ok, String why) {
        end(i, ok ? OK : FAILED, why);
    }

    /** One work-request slice of group slice {@code i} ended; the last one decides. */
    void sliceDone(int i, boolean ok, boolean unreachable) {
        if (!ok) {
            int f = unreachable ? UNREACHABLE : FAILED;
            int cur;
            do {
                cur = (int) INTS.getVolatile(failure, i);
            } while (cur < f && !INTS.compareAndSet(failure, i, cur, f));
        }
        if ((int) INTS.getAndAdd(slicesLeft, i, -1) == 1) {
            int f = (int) INTS.getVolatile(failure, i);
            end(i, f, f == UNREACHABLE ? "endpoint bring-up failed on every path (MC_RETRY_CNT)"
                    : "work requests failed on every path (MC_RETRY_CNT)");
        }
    }

    private void end(int i, int f, String why) {
        if (f == OK) {
            group.complete(i);
        } else { // of an aborted batch the core ends it FAILED without a fallback (a timed-out one is already TIMEOUT)
            group.fail(i, f == UNREACHABLE ? SliceFailure.UNREACHABLE : SliceFailure.TRANSIENT,
                    aborted() ? "abandoned (batch aborted or transport closing)" : why);
        }
        if (open.decrementAndGet() == 0) {
            onDone.run();
        }
    }

    /** Waits until no work request of this group is outstanding; true when none is. */
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
