package io.mooncake4j.connector.worker;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * An embedder's wait for "something finished" through the public path, the worker's finished listener
 * ({@link MooncakeConnectorWorker#setFinishedListener}): one thread waits, the connector thread that made
 * an event visible signals it. A signal that came while nobody waited is kept for the next wait, so none
 * is lost (the listener runs after its event is visible to {@code getFinished}). Tests and probes.
 */
final class FinishSignal implements Runnable {

    private final AtomicBoolean pending = new AtomicBoolean();
    private volatile Thread waiter;

    /** {@return a signal registered as {@code w}'s finished listener (replacing any other)} */
    static FinishSignal on(MooncakeConnectorWorker w) {
        FinishSignal s = new FinishSignal();
        w.setFinishedListener(s);
        return s;
    }

    @Override
    public void run() {
        pending.set(true);
        Thread t = waiter;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /**
     * Waits at most {@code nanos} for a signal not yet consumed: true (and consumed) when one came, false
     * at the deadline or when the thread is interrupted. For one waiting thread at a time.
     */
    boolean await(long nanos) {
        if (pending.getAndSet(false)) {
            return true;
        }
        long deadline = System.nanoTime() + nanos;
        waiter = Thread.currentThread();
        try {
            while (!pending.getAndSet(false)) {
                long left = deadline - System.nanoTime();
                if (left <= 0 || Thread.currentThread().isInterrupted()) {
                    return false;
                }
                LockSupport.parkNanos(this, left);
            }
            return true;
        } finally {
            waiter = null;
        }
    }
}
