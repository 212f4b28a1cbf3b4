package io.mooncake4j.engine.core;

import io.mooncake4j.engine.TransferStatus;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The state every transport keeps for one batch of transfer tasks, in parallel primitive arrays
 * so that neither submission nor completion allocates per descriptor. Task slots are appended by
 * {@code submitTransfer} (under the batch monitor) and finished exactly once by whichever thread
 * completes them (CAS on the state). Mooncake's rules: a task is WAITING until it is COMPLETED,
 * FAILED or TIMEOUT; a batch can be freed only once every task was observed terminal by a status
 * query. Thread-safe; transports extend it with their own per-task bookkeeping.
 */
public abstract class TaskBatch {

    public static final int WAITING = TransferStatus.State.WAITING.ordinal();
    public static final int COMPLETED = TransferStatus.State.COMPLETED.ordinal();
    public static final int FAILED = TransferStatus.State.FAILED.ordinal();
    public static final int TIMEOUT = TransferStatus.State.TIMEOUT.ordinal();

    private static final VarHandle STATE = MethodHandles.arrayElementVarHandle(int[].class);
    private static final TransferStatus.State[] STATES = TransferStatus.State.values();

    public final long id;
    public final int capacity;
    public final int[] opcode;
    public final long[] local;
    public final long[] remote;
    public final long[] length;
    public final long[] target;
    private final int[] state;
    private final boolean[] observed;
    /** Tasks appended so far; written under the monitor, read by status queries. */
    private volatile int size;
    private final AtomicInteger pending = new AtomicInteger();
    /** Set once when the batch's owner gave up (timeout, close): no transport thread may touch its memory afterwards. */
    public volatile boolean aborted;
    private volatile Thread waiter;

    protected TaskBatch(long id, int capacity) {
        this.id = id;
        this.capacity = capacity;
        this.opcode = new int[capacity];
        this.local = new long[capacity];
        this.remote = new long[capacity];
        this.length = new long[capacity];
        this.target = new long[capacity];
        this.state = new int[capacity];
        this.observed = new boolean[capacity];
    }

    public final int size() {
        return size;
    }

    /** Appends a task in state WAITING; the caller holds the monitor and checked the capacity. */
    public final int append(int op, long localAddr, long targetId, long remoteAddr, long len) {
        int i = size;
        opcode[i] = op;
        local[i] = localAddr;
        target[i] = targetId;
        remote[i] = remoteAddr;
        length[i] = len;
        STATE.setVolatile(state, i, WAITING);
        pending.incrementAndGet();
        size = i + 1;
        return i;
    }

    public final int state(int i) {
        return (int) STATE.getVolatile(state, i);
    }

    public final boolean isTerminal(int i) {
        return state(i) != WAITING;
    }

    /** Moves task {@code i} from WAITING to {@code to}; false if it was already terminal. */
    public final boolean finish(int i, int to) {
        if (!STATE.compareAndSet(state, i, WAITING, to)) {
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

    /** Whether no task is waiting any more. */
    public final boolean allDone() {
        return pending.get() == 0;
    }

    /** Tasks not yet terminal. */
    protected final int pendingCount() {
        return pending.get();
    }

    /** Whether every appended task completed successfully. */
    public final boolean allCompleted() {
        int n = size;
        for (int i = 0; i < n; i++) {
            if (state(i) != COMPLETED) {
                return false;
            }
        }
        return true;
    }

    /**
     * Waits until every task is terminal or the deadline passes, parking at most
     * {@code maxParkNanos} at a time; true when all are terminal.
     */
    public final boolean await(long deadlineNanos, long maxParkNanos) {
        waiter = Thread.currentThread();
        try {
            while (!allDone()) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                LockSupport.parkNanos(this, Math.min(left, maxParkNanos));
            }
            return true;
        } finally {
            waiter = null;
        }
    }

    /** Ends every task still waiting with {@code to} (FAILED or TIMEOUT). */
    public final void failAll(int to) {
        int n = size;
        for (int i = 0; i < n; i++) {
            finish(i, to);
        }
    }

    /** Bytes moved by a COMPLETED task (its length unless the transport counts them itself). */
    protected long transferredBytes(int i) {
        return length[i];
    }

    /** Mooncake's {@code getTransferStatus}: marks a terminal task as observed. */
    public final synchronized TransferStatus status(int i) {
        int s = state(i);
        if (s != WAITING) {
            observed[i] = true;
        }
        return new TransferStatus(0, STATES[s], s == COMPLETED ? transferredBytes(i) : 0);
    }

    /** Whether every task has been observed terminal by a status query (Mooncake's rule for freeing). */
    public final synchronized boolean allObserved() {
        int n = size;
        for (int i = 0; i < n; i++) {
            if (!observed[i]) {
                return false;
            }
        }
        return true;
    }

    /** Forgets the tasks of a batch whose tasks all completed, for reuse; false (do not reuse) otherwise. */
    protected final synchronized boolean clearForReuse() {
        if (aborted || pending.get() != 0 || !allCompleted()) {
            return false;
        }
        java.util.Arrays.fill(observed, 0, size, false);
        size = 0;
        return true;
    }
}
