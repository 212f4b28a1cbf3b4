package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.TransferStatus;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * One batch of transfer tasks, held in parallel primitive arrays so that neither submission nor
 * completion allocates per descriptor. Task slots are appended by {@code submitTransfer} (under
 * the batch monitor) and completed exactly once by whichever thread finishes them (CAS on the
 * state). Thread-safe.
 */
final class Batch {

    static final int WAITING = TransferStatus.State.WAITING.ordinal();
    static final int COMPLETED = TransferStatus.State.COMPLETED.ordinal();
    static final int FAILED = TransferStatus.State.FAILED.ordinal();
    static final int TIMEOUT = TransferStatus.State.TIMEOUT.ordinal();

    private static final VarHandle STATE = MethodHandles.arrayElementVarHandle(int[].class);
    private static final TransferStatus.State[] STATES = TransferStatus.State.values();

    final long id;
    final int capacity;
    final byte[] opcode;
    final long[] local;
    final long[] remote;
    final long[] length;
    final long[] target;
    private final int[] state;
    private final boolean[] observed;
    /** Tasks appended so far; written under the monitor, read by status queries. */
    private volatile int size;
    private final AtomicInteger pending = new AtomicInteger();
    /** Set once when the batch's owner gave up (timeout, close): no lane may touch its memory afterwards. */
    volatile boolean aborted;
    private volatile Thread waiter;

    Batch(long id, int capacity) {
        this.id = id;
        this.capacity = capacity;
        this.opcode = new byte[capacity];
        this.local = new long[capacity];
        this.remote = new long[capacity];
        this.length = new long[capacity];
        this.target = new long[capacity];
        this.state = new int[capacity];
        this.observed = new boolean[capacity];
    }

    int size() {
        return size;
    }

    /**
     * Makes a batch whose tasks all completed reusable for the next synchronous call of the same
     * thread: every task was then claimed and completed by a lane, so no queued work or ring entry
     * refers to it any more. Returns false (do not reuse) otherwise.
     */
    boolean reset() {
        if (aborted || pending.get() != 0 || !allCompleted()) {
            return false;
        }
        int n = size;
        java.util.Arrays.fill(observed, 0, n, false);
        size = 0;
        return true;
    }

    /** Appends a task in state WAITING; caller holds the monitor and checked capacity. */
    int append(int op, long localAddr, long targetId, long remoteAddr, long len) {
        int i = size;
        opcode[i] = (byte) op;
        local[i] = localAddr;
        target[i] = targetId;
        remote[i] = remoteAddr;
        length[i] = len;
        STATE.setVolatile(state, i, WAITING);
        pending.incrementAndGet();
        size = i + 1;
        return i;
    }

    int state(int i) {
        return (int) STATE.getVolatile(state, i);
    }

    boolean isTerminal(int i) {
        return state(i) != WAITING;
    }

    /** Moves task {@code i} from WAITING to {@code to}; false if it was already terminal. */
    boolean finish(int i, int to) {
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

    boolean allDone() {
        return pending.get() == 0;
    }

    /** Whether every appended task completed successfully. */
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
                LockSupport.parkNanos(this, Math.min(left, 50_000_000L));
            }
            return true;
        } finally {
            waiter = null;
        }
    }

    /** Fails every task still waiting with {@code to} (FAILED or TIMEOUT). */
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
        return new TransferStatus(0, STATES[s], s == COMPLETED ? length[i] : 0);
    }

    /** Whether every task has been observed terminal by a status query. */
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
