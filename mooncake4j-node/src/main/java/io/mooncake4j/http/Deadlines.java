package io.mooncake4j.http;

import org.eclipse.jetty.http.HttpParser;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.server.internal.HttpConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The two deadlines a slow client is held to, checked by one sweeper thread a few times per second:
 * a request's header block must be complete within {@link HttpLimits#headerTimeout()} (a connection
 * trickling header bytes is not idle, so the idle timeout alone never ends it), and a body being read
 * must deliver {@link HttpLimits#minBodyRate()} in every window of {@link HttpLimits#bodyGrace()} once
 * the first has passed (a recent window: a fast start buys no time later) and be complete by its overall
 * deadline ({@link HttpLimits#bodyDeadlineRate()}). Either way the connection is closed: its reads fail,
 * its slots are given back.
 *
 * <p>Where a request is stands in Jetty's parser of the connection (a volatile state); the header
 * clock runs from the connection's opening for its first request, and from the first byte of a later
 * one (the parser leaves its start state). Between requests the idle timeout applies.
 *
 * <p>Threads: Jetty calls the listener on its selector threads; the sweeper is one platform thread,
 * {@code <name>-deadlines}; bodies are counted by the request threads that read them.
 */
final class Deadlines implements Connection.Listener, AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(Deadlines.class);

    private final HttpLimits limits;
    private final Map<Connection, HeaderClock> connections = new ConcurrentHashMap<>();
    private final Map<BodyWatch, Boolean> bodies = new ConcurrentHashMap<>();
    private final ScheduledExecutorService sweeper;
    private final AtomicLong headerTimeouts = new AtomicLong();
    private final AtomicLong slowBodies = new AtomicLong();
    private final AtomicLong lateBodies = new AtomicLong();

    /** When the connection's current request started sending its header (0: not in a header now). */
    private static final class HeaderClock {
        final long opened = System.nanoTime();
        long since; // the sweeper's own
    }

    /** The progress of one body being read. */
    final class BodyWatch implements AutoCloseable {
        private final Connection connection;
        private final long declared; // Content-Length, -1 when chunked
        private final AtomicLong bytes = new AtomicLong();
        private volatile long started; // first read; 0 = not yet read
        private volatile boolean done;
        private long windowStart; // the sweeper's own: 0 = the grace is running
        private long windowBytes; // the sweeper's own

        BodyWatch(Connection connection, long declared) {
            this.connection = connection;
            this.declared = declared;
        }

        void reading() {
            if (started == 0 && !done) {
                started = System.nanoTime() | 1; // never 0
                bodies.put(this, Boolean.TRUE);
            }
        }

        void got(int n) {
            bytes.addAndGet(n);
        }

        /** Bytes read so far. */
        long bytes() {
            return bytes.get();
        }

        /** Bytes per second since the first read (0 before it). */
        double rate(long now) {
            long s = started;
            return s == 0 ? 0 : bytes.get() / Math.max(1e-3, (now - s) / 1e9);
        }

        /** Whether this body has been reading for at least {@code nanos}. */
        boolean olderThan(long now, long nanos) {
            long s = started;
            return s != 0 && now - s >= nanos;
        }

        /** Closes the connection (the body's reader fails, its slots are given back). */
        void cut() {
            close();
            connection.getEndPoint().close();
        }

        @Override
        public void close() {
            done = true;
            bodies.remove(this);
        }
    }

    Deadlines(HttpLimits limits, String name) {
        this.limits = limits;
        long period = Math.clamp(Math.min(limits.headerTimeout().toMillis(),
                Math.max(limits.bodyGrace().toMillis(), 400)) / 8, 50, 500);
        this.sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, name + "-deadlines");
            t.setDaemon(true);
            return t;
        });
        sweeper.scheduleWithFixedDelay(this::sweep, period, period, TimeUnit.MILLISECONDS);
    }

    /** Connections closed because their request header did not complete in time. */
    long headerTimeouts() {
        return headerTimeouts.get();
    }

    /** Connections closed because their request body arrived slower than the minimum rate. */
    long slowBodies() {
        return slowBodies.get();
    }

    /** Connections closed because their request body was not complete by its overall deadline. */
    long lateBodies() {
        return lateBodies.get();
    }

    BodyWatch watchBody(Connection connection, long declaredLength) {
        return new BodyWatch(connection, declaredLength);
    }

    @Override
    public void onOpened(Connection connection) {
        if (connection instanceof HttpConnection) {
            connections.put(connection, new HeaderClock());
        }
    }

    @Override
    public void onClosed(Connection connection) {
        connections.remove(connection);
    }

    private void sweep() {
        try {
            long now = System.nanoTime();
            long headerNanos = limits.headerTimeout().toNanos();
            for (Map.Entry<Connection, HeaderClock> e : connections.entrySet()) {
                if (!(e.getKey() instanceof HttpConnection c)) {
                    continue;
                }
                HeaderClock clock = e.getValue();
                HttpParser.State s = c.getParser().getState();
                long since;
                if (s == HttpParser.State.START) {
                    // a fresh connection owes its first header from the start; a kept-alive one is idle
                    since = c.getMessagesIn() == 0 ? clock.opened : 0;
                } else if (s.compareTo(HttpParser.State.HEADER) <= 0) {
                    since = clock.since != 0 ? clock.since : now;
                } else {
                    since = 0;
                }
                clock.since = since;
                if (since != 0 && now - since > headerNanos) {
                    headerTimeouts.incrementAndGet();
                    LOG.debug("closing {}: no complete request header within {}", c.getEndPoint().getRemoteSocketAddress(),
                            limits.headerTimeout());
                    connections.remove(c);
                    c.getEndPoint().close();
                }
            }
            long rate = limits.minBodyRate();
            long deadlineRate = limits.bodyDeadlineRate();
            long grace = limits.bodyGrace().toNanos();
            long window = Math.max(grace, TimeUnit.SECONDS.toNanos(1));
            for (BodyWatch b : bodies.keySet()) {
                long age = now - b.started;
                if (b.done || age <= grace) {
                    continue;
                }
                long got = b.bytes.get();
                if (deadlineRate > 0) {
                    // the overall deadline: the grace plus the declared length (or, chunked, what came so far)
                    double owedTotal = b.declared >= 0 ? b.declared : deadlineRate * ((age - grace) / 1e9);
                    double allowed = grace + owedTotal / deadlineRate * 1e9;
                    if ((b.declared >= 0 && age > allowed && got < b.declared) || (b.declared < 0 && got < owedTotal)) {
                        lateBodies.incrementAndGet();
                        LOG.debug("closing {}: request body at {} of {} bytes after {} ms, past its deadline "
                                + "({} bytes/s after a {} grace)", b.connection.getEndPoint().getRemoteSocketAddress(),
                                got, b.declared, age / 1_000_000, deadlineRate, limits.bodyGrace());
                        b.cut();
                        continue;
                    }
                }
                if (rate <= 0) {
                    continue;
                }
                if (b.windowStart == 0) {
                    b.windowStart = now;
                    b.windowBytes = got;
                    continue;
                }
                long span = now - b.windowStart;
                if (span < window) {
                    continue;
                }
                long recent = got - b.windowBytes;
                if (recent < rate * (span / 1e9)) {
                    slowBodies.incrementAndGet();
                    LOG.debug("closing {}: request body sent {} bytes in the last {} ms, below {} bytes/s",
                            b.connection.getEndPoint().getRemoteSocketAddress(), recent, span / 1_000_000, rate);
                    b.cut();
                } else {
                    b.windowStart = now;
                    b.windowBytes = got;
                }
            }
        } catch (RuntimeException e) {
            LOG.error("HTTP deadline sweep failed; the next sweep retries", e);
        }
    }

    @Override
    public void close() {
        sweeper.shutdownNow();
    }
}
