package io.mooncake4j.engine.handshake;

import java.io.Closeable;
import java.io.IOException;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Total deadlines for blocking socket work: {@link #arm} schedules a {@link Closeable} (a socket or
 * channel) to be closed at a deadline unless the returned {@link Deadline} is closed first, so that
 * a peer that trickles bytes (each read within any per-read timeout) or stops reading our writes
 * cannot hold the thread past the deadline. One virtual thread ({@code mooncake-deadline-reaper})
 * serves the whole JVM; it starts with the first deadline and costs no platform thread.
 * Thread-safe.
 */
public final class SocketDeadlines {

    private static final Logger LOG = LoggerFactory.getLogger(SocketDeadlines.class);
    private static final DelayQueue<Deadline> QUEUE = new DelayQueue<>();
    private static volatile Thread reaper;

    private SocketDeadlines() {
    }

    /** A scheduled close; {@link #close()} cancels it. */
    public static final class Deadline implements Delayed, AutoCloseable {
        private final Closeable target;
        private final long atNanos;
        private volatile boolean cancelled;
        private volatile boolean fired;

        private Deadline(Closeable target, long atNanos) {
            this.target = target;
            this.atNanos = atNanos;
        }

        /** Whether the deadline passed and the target was closed by it. */
        public boolean fired() {
            return fired;
        }

        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(atNanos - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed o) {
            return Long.compare(atNanos, ((Deadline) o).atNanos);
        }

        /** Cancels the deadline (the target stays open). */
        @Override
        public void close() {
            cancelled = true;
            QUEUE.remove(this);
        }

        void fire() {
            if (cancelled) {
                return;
            }
            fired = true;
            try {
                target.close();
            } catch (IOException e) {
                LOG.debug("closing at deadline: {}", e.getMessage());
            }
        }
    }

    /**
     * Closes {@code target} once {@code timeoutMs} have passed, unless the returned deadline is
     * closed first.
     */
    public static Deadline arm(Closeable target, long timeoutMs) {
        Deadline d = new Deadline(target, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs));
        ensureReaper();
        QUEUE.add(d);
        return d;
    }

    private static void ensureReaper() {
        if (reaper != null) {
            return;
        }
        synchronized (SocketDeadlines.class) {
            if (reaper == null) {
                reaper = Thread.ofVirtual().name("mooncake-deadline-reaper").start(SocketDeadlines::reap);
            }
        }
    }

    private static void reap() {
        while (true) {
            try {
                QUEUE.take().fire();
            } catch (InterruptedException e) {
                // nobody interrupts this thread on purpose; keep serving deadlines
                LOG.debug("deadline reaper interrupted; continuing");
            } catch (RuntimeException e) {
                LOG.error("deadline reaper: closing a socket failed", e);
            }
        }
    }
}
