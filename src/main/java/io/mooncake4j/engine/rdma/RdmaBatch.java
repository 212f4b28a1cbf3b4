package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferStatus;
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
final class RdmaBatch {

    static final int WAITING = TransferStatus.State.WAITING.ordinal();
    static final int COMPLETED = TransferStatus.State.COMPLETED.ordinal();
    static final int FAILED = TransferStatus.State.FAILED.ordinal();
    static final int TIMEOUT = TransferStatus.State.TIMEOUT.ordinal();

    private static final VarHandle INTS = MethodHandles.arrayElementVarHandle(int[].class);
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final TransferStatus.State[] STATES = TransferStatus.State.values();

    final long id;
    final int capacity;
    final int[] opcode;
    final long[] local;
    final long[] remote;
    final long[] length;
    final long[] target;
    private final int[] state;
    private final int[] slicesLeft;
    private final int[] sliceFailed;
    private final long[] transferred;
    private final boolean[] observed;
    private volatile int size;
    private final AtomicInteger pending = new AtomicInteger();
    /** Posted work requests of this batch not yet completed. */
    final AtomicInteger inFlight = new AtomicInteger();
    /** Set once the owner gave up (timeout, close): nothing more of this batch may be posted. */
    volatile boolean aborted;
    private volatile Thread waiter;

    RdmaBatch(long id, int capacity) {
        this.id = id;
        this.capacity = capacity;
        this.opcode = new int[capacity];
        this.local = new long[capacity];
        this.remote = new long[capacity];
        this.length = new long[capacity];
        this.target = new long[capacity];
        this.state = new int[capacity];
        this.slicesLeft = new int[capacity];
        this.sliceFailed = new int[capacity];
        this.transferred = new long[capacity];
        this.observed = new boolean[capacity];
    }

    int size() {
        return size;
    }

    /** Appends a task in WAITING; the caller holds the monitor and checked the capacity. */
    int append(int op, long localAddr, long targetId, long remoteAddr, long len) {
        int i = size;
        opcode[i] = op;
        local[i] = localAddr;
        target[i] = targetId;
        remote[i] = remoteAddr;
        length[i] = len;
        INTS.setVolatile(state, i, WAITING);
        pending.incrementAndGet();
        size = i + 1;
        return i;
    }

    int state(int i) {
        return (int) INTS.getVolatile(state, i);
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

    /** Moves task {@code i} from WAITING to {@code to}; false if it was already terminal. */
    boolean finish(int i, int to) {
        if (!INTS.compareAndSet(state, i, WAITING, to)) {
            return false;
        }
        if (pending.decrementAndGet() == 0) {
            Thread w = waiter;
            if (w != null) {
                LockSupport.unpark(w);
            }
        }
        return true;
    }

    boolean allDone() {
        return pending.get() == 0;
    }

    boolean allCompleted() {
        int n = size;
        for (int i = 0; i < n; i++) {
            if (state(i) != COMPLETED) {
                return false;
            }
        }
        return true;
    }

    /** Waits until every task is terminal or the deadline passes; true when all are terminal. */
    boolean await(long deadlineNanos) {
        waiter = Thread.currentThread();
        try {
            while (!allDone()) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                LockSupport.parkNanos(this, Math.min(left, 20_000_000L));
            }
            return true;
        } finally {
            waiter = null;
        }
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

    /** Ends every task still waiting with {@code to}. */
    void failAll(int to) {
        int n = size;
        for (int i = 0; i < n; i++) {
            finish(i, to);
        }
    }

    synchronized TransferStatus status(int i) {
        int s = state(i);
        if (s != WAITING) {
            observed[i] = true;
        }
        return new TransferStatus(0, STATES[s], s == COMPLETED ? (long) LONGS.getVolatile(transferred, i) : 0);
    }

    synchronized boolean allObserved() {
        int n = size;
        for (int i = 0; i < n; i++) {
            if (!observed[i]) {
                return false;
            }
        }
        return true;
    }
}
