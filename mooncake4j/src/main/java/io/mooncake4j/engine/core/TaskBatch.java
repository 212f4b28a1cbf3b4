package io.mooncake4j.engine.core;

import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.SliceFailure;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * One batch of transfer tasks of the core, in parallel primitive arrays so that neither
 * submission nor completion allocates per descriptor. Task slots are appended by
 * {@code submitTransfer} (under the batch monitor) and finished exactly once by whichever thread
 * completes them (CAS on the state). Mooncake's rules: a task is WAITING until it is COMPLETED,
 * FAILED or TIMEOUT; a batch can be freed only once every task was observed terminal by a status
 * query. Per task it also keeps the index of the transport (in the core's order) that holds it
 * now, so that a retryable failure moves it to a later one only (at most one attempt per
 * installed transport). Transports see it as {@link BatchTasks}. Thread-safe.
 */
public class TaskBatch implements BatchTasks {

    public static final int WAITING = TransferStatus.State.WAITING.ordinal();
    public static final int COMPLETED = TransferStatus.State.COMPLETED.ordinal();
    public static final int FAILED = TransferStatus.State.FAILED.ordinal();
    public static final int TIMEOUT = TransferStatus.State.TIMEOUT.ordinal();

    private static final VarHandle STATE = MethodHandles.arrayElementVarHandle(int[].class);
    private static final TransferStatus.State[] STATES = TransferStatus.State.values();
    private static final int WRITE = TransferRequest.Opcode.WRITE.wire();

    public long id;
    public int capacity;
    public int[] opcode;
    public long[] local;
    public long[] remote;
    public long[] length;
    public long[] target;
    private final int[] state;
    private final boolean[] observed;
    /** Tasks appended so far; written under the monitor, read by status queries. */
    private volatile int size;
    private final AtomicInteger pending = new AtomicInteger();
    /** Set once when the batch's owner gave up (timeout, close): no transport thread may touch its memory afterwards. */
    public volatile boolean aborted;
    private volatile Thread waiter;
    /** Transport index per task; written by the submitting thread before hand-over, then under the batch monitor. */
    final byte[] via;
    /**
     * The registered local buffer of each routed task (null for a task the last routing dropped);
     * written by the submitting thread before hand-over, read by the transport holding the task.
     * Kept per task so that routing allocates nothing per descriptor.
     */
    final LocalBuffer[] localBuf;
    /** The peer of each routed task; written with {@link #localBuf}. */
    final CorePeer[] peer;
    /** The router that routed this batch's tasks (one per initialised engine); null before. */
    volatile Router router;

    public TaskBatch(long id, int capacity) {
        this.id = id;
        this.capacity = capacity;
        this.opcode = new int[capacity];
        this.local = new long[capacity];
        this.remote = new long[capacity];
        this.length = new long[capacity];
        this.target = new long[capacity];
        this.state = new int[capacity];
        this.observed = new boolean[capacity];
        this.via = new byte[capacity];
        this.localBuf = new LocalBuffer[capacity];
        this.peer = new CorePeer[capacity];
    }

    @Override
    public long id() {
        return id;
    }

    @Override
    public boolean aborted() {
        return aborted;
    }

    @Override
    public boolean isWrite(int task) {
        return opcode[task] == WRITE;
    }

    @Override
    public long local(int task) {
        return local[task];
    }

    @Override
    public long remote(int task) {
        return remote[task];
    }

    @Override
    public long length(int task) {
        return length[task];
    }

    @Override
    public boolean complete(int task) {
        return finish(task, COMPLETED);
    }

    @Override
    public boolean fail(int task, String transport, SliceFailure failure, String why) {
        Router r = router;
        int from = r == null ? -1 : r.indexOf(transport);
        if (from < 0) { // a transport bug (it names another, or a batch no router took): end it, nothing hangs
            return finish(task, failure == SliceFailure.TIMEOUT ? TIMEOUT : FAILED);
        }
        return fail(task, from, failure, why);
    }

    /**
     * Task {@code task} failed on installed transport {@code from}: a retryable failure moves it
     * to the next capable transport ({@link Router#fallBack}), anything else ends it (TIMEOUT for a
     * timeout, else FAILED). The one way a task fails once routed, for {@link Slices} and
     * {@link #fail(int, String, SliceFailure, String)} alike.
     *
     * @return false when the task had already ended or transport {@code from} no longer holds it
     */
    boolean fail(int task, int from, SliceFailure failure, String why) {
        Router r = router;
        CorePeer p = peer[task];
        if (r == null || p == null) {
            return finish(task, failure == SliceFailure.TIMEOUT ? TIMEOUT : FAILED);
        }
        synchronized (this) {
            if (via[task] != from) {
                return false; // a late report: the task already moved on
            }
        }
        if (failure.retryable() && !aborted && r.fallBack(this, p, task, from, localBuf[task], failure, why)) {
            return true;
        }
        return finish(task, failure == SliceFailure.TIMEOUT ? TIMEOUT : FAILED);
    }

    public int size() {
        return size;
    }

    /** Appends a task in state WAITING; the caller holds the monitor and checked the capacity. */
    public int append(int op, long localAddr, long targetId, long remoteAddr, long len) {
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

    public int state(int i) {
        return (int) STATE.getVolatile(state, i);
    }

    @Override
    public boolean isTerminal(int i) {
        return state(i) != WAITING;
    }

    /** Moves task {@code i} from WAITING to {@code to}; false if it was already terminal. */
    public boolean finish(int i, int to) {
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
    public boolean allDone() {
        return pending.get() == 0;
    }

    /** Whether every appended task completed successfully. */
    public boolean allCompleted() {
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
    public boolean await(long deadlineNanos, long maxParkNanos) {
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
    public void failAll(int to) {
        int n = size;
        for (int i = 0; i < n; i++) {
            finish(i, to);
        }
    }

    /** Mooncake's {@code getTransferStatus}: marks a terminal task as observed. */
    public synchronized TransferStatus status(int i) {
        int s = state(i);
        if (s != WAITING) {
            observed[i] = true;
        }
        return new TransferStatus(0, STATES[s], s == COMPLETED ? length[i] : 0);
    }

    /** Whether every task has been observed terminal by a status query (Mooncake's rule for freeing). */
    public synchronized boolean allObserved() {
        int n = size;
        for (int i = 0; i < n; i++) {
            if (!observed[i]) {
                return false;
            }
        }
        return true;
    }

    /** Forgets the tasks of a batch whose tasks all completed, for reuse; false (do not reuse) otherwise. */
    synchronized boolean reset() {
        if (aborted || pending.get() != 0 || !allCompleted()) {
            return false;
        }
        java.util.Arrays.fill(observed, 0, size, false);
        size = 0;
        return true;
    }
}
