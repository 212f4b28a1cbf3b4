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
 * must keep up {@link HttpLimits#minBodyRate()} once {@link HttpLimits#bodyGrace()} has passed. Either
 * way the connection is closed: its reads fail, its slots are given back.
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

    /** When the connection's current request started sending its header (0: not in a header now). */
    private static final class HeaderClock {
        final long opened = System.nanoTime();
        long since; // the sweeper's own
    }

    /** The progress of one body being read. */
    final class BodyWatch implements AutoCloseable {
        private final Connection connection;
        private final AtomicLong bytes = new AtomicLong();
        private volatile long started; // first read; 0 = not yet read
        private volatile boolean done;

        BodyWatch(Connection connection) {
            this.connection = connection;
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

    BodyWatch watchBody(Connection connection) {
        return new BodyWatch(connection);
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
            if (rate > 0) {
                long grace = limits.bodyGrace().toNanos();
                for (BodyWatch b : bodies.keySet()) {
                    long t = now - b.started - grace;
                    if (b.done || t <= 0) {
                        continue;
                    }
                    double owed = rate * (t / 1e9);
                    if (b.bytes.get() < owed) {
                        slowBodies.incrementAndGet();
                        LOG.debug("closing {}: request body at {} bytes after {} ms, below {} bytes/s",
                                b.connection.getEndPoint().getRemoteSocketAddress(), b.bytes.get(),
                                (now - b.started) / 1_000_000, rate);
                        b.close();
                        b.connection.getEndPoint().close();
                    }
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
