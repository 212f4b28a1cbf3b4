package io.mooncake4j.store;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Counts calls in flight (and open buffers) so that close can wait for them; thread-safe. */
final class InFlight {

    private int n;

    /** {@return false (and nothing counted) when {@code closed} says the client is closed} */
    synchronized boolean enter(BooleanSupplier closed) {
        if (closed.getAsBoolean()) {
            return false;
        }
        n++;
        return true;
    }

    /** Counts one more while a call already counted is in flight (a buffer it hands out). */
    synchronized void enterAnyway() {
        n++;
    }

    synchronized void exit() {
        if (--n == 0) {
            notifyAll();
        }
    }

    synchronized int get() {
        return n;
    }

    /** {@return whether the count reached 0 within {@code nanos}} */
    synchronized boolean awaitZero(long nanos) {
        long end = System.nanoTime() + nanos;
        while (n > 0) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            try {
                TimeUnit.NANOSECONDS.timedWait(this, left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return n == 0;
            }
        }
        return true;
    }
}
