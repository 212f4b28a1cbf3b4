package io.mooncake4j.internal.sys;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Notices HTTP clients that went away while their request is being served (used by {@code serve} and
 * {@code proxy}), so that the request can be aborted as vLLM's server does (it aborts a request whose client disconnected). The JDK's HTTP server does
 * not tell a handler that its connection closed, so one watcher thread ({@code mooncake-serve-disconnect-N})
 * looks at the kernel's TCP table ({@code /proc/net/tcp} and {@code /proc/net/tcp6}, Linux) every
 * {@code period} while a connection has been watched for at least {@code minAge}: reading the table costs
 * the kernel time in proportion to every socket of the host's network namespace (about 15 ms of CPU for
 * 11,000 sockets), so short requests, which end before anyone needs to abort them, never cause a read.
 * A connection whose peer closed it ({@code CLOSE_WAIT},
 * {@code CLOSE}) or that is gone from the table (reset) on two looks in a row counts as disconnected, and its
 * callback runs once (on the watcher thread: keep it short). Connections are told apart by their local and
 * remote ports; when another connection with the same ports is still established, nothing is reported (a
 * missed abort, never a false one). Without a TCP table (not Linux) the watch is off ({@link #enabled()}) and
 * a disconnect is only noticed when a write to the client fails.
 *
 * <p>Thread-safe; {@link #close()} stops the watcher.
 */
public final class ClientWatch implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ClientWatch.class);
    private static final List<Path> TABLES = List.of(Path.of("/proc/net/tcp"), Path.of("/proc/net/tcp6"));
    private static final int ESTABLISHED = 0x01;
    private static final int CLOSE = 0x07;
    private static final int CLOSE_WAIT = 0x08;

    /** One watched connection. */
    public final class Watch implements AutoCloseable {
        private final long key;
        private final Runnable onGone;
        private final long since = System.nanoTime();
        private int missing;
        private volatile boolean done;

        private Watch(long key, Runnable onGone) {
            this.key = key;
            this.onGone = onGone;
        }

        /** Stops watching (the request finished). Idempotent. */
        @Override
        public void close() {
            done = true;
            watches.remove(this);
        }
    }

    private final Duration period;
    private final Duration minAge;
    private final boolean enabled;
    private final Set<Watch> watches = ConcurrentHashMap.newKeySet();
    private final Thread thread;
    private volatile boolean closed;

    /**
     * Starts the watcher thread (when a TCP table is readable).
     *
     * @param period how often the table is read while a connection has been watched for {@code minAge}
     * @param minAge how long a connection is watched before the table is read for it
     * @param name   the watcher thread's name
     */
    public ClientWatch(Duration period, Duration minAge, String name) {
        this.period = period;
        this.minAge = minAge;
        this.enabled = TABLES.stream().anyMatch(Files::isReadable);
        this.thread = Thread.ofPlatform().daemon().name(name).unstarted(this::loop);
        if (enabled) {
            thread.start();
        } else {
            LOG.debug("no readable TCP table ({}): client disconnects are noticed only when a write fails", TABLES);
        }
    }

    /** Whether disconnects are watched (a TCP table is readable). */
    public boolean enabled() {
        return enabled;
    }

    /**
     * Watches the connection between {@code local} (this server's end) and {@code remote}; {@code onGone} runs
     * once if the client goes away before the watch is closed.
     */
    public Watch watch(InetSocketAddress local, InetSocketAddress remote, Runnable onGone) {
        Watch w = new Watch(key(local.getPort(), remote.getPort()), onGone);
        if (enabled && !closed) {
            watches.add(w);
            LockSupport.unpark(thread);
        }
        return w;
    }

    /** The key {@link #parse} files a connection under. */
    public static long key(int localPort, int remotePort) {
        return ((long) localPort << 16) | remotePort;
    }

    private void loop() {
        while (!closed) {
            if (watches.isEmpty()) {
                LockSupport.parkNanos(this, Duration.ofSeconds(1).toNanos());
                continue;
            }
            LockSupport.parkNanos(this, period.toNanos());
            long now = System.nanoTime();
            if (watches.stream().noneMatch(w -> now - w.since >= minAge.toNanos())) {
                continue;
            }
            Map<Long, Integer> states;
            try {
                states = readTables();
            } catch (IOException | RuntimeException e) {
                LOG.warn("cannot read the TCP table; client disconnects are not watched until it can be read: {}",
                        e.toString());
                LockSupport.parkNanos(this, Duration.ofSeconds(5).toNanos());
                continue;
            }
            for (Watch w : watches) {
                if (now - w.since < minAge.toNanos()) {
                    continue;
                }
                Integer st = states.get(w.key);
                boolean gone;
                if (st == null) {
                    gone = ++w.missing >= 2;
                } else {
                    w.missing = 0;
                    gone = st == CLOSE_WAIT || st == CLOSE;
                }
                if (gone && !w.done) {
                    w.close();
                    try {
                        w.onGone.run();
                    } catch (RuntimeException e) {
                        LOG.warn("the disconnect callback failed", e);
                    }
                }
            }
        }
    }

    /**
     * Local port and remote port → state of every TCP connection; when several share the ports, an
     * established one wins.
     */
    public static Map<Long, Integer> readTables() throws IOException {
        Map<Long, Integer> out = new HashMap<>();
        for (Path t : TABLES) {
            if (!Files.isReadable(t)) {
                continue;
            }
            parse(Files.readString(t, StandardCharsets.US_ASCII), out);
        }
        return out;
    }

    /** Parses one {@code /proc/net/tcp}-format table into {@code out}. */
    public static void parse(String table, Map<Long, Integer> out) {
        int n = table.length();
        int pos = 0;
        while (pos < n) {
            int eol = table.indexOf('\n', pos);
            if (eol < 0) {
                eol = n;
            }
            parseLine(table, pos, eol, out);
            pos = eol + 1;
        }
    }

    /** One line: {@code sl: local_address rem_address st ...}, addresses as {@code HEXIP:HEXPORT}. */
    private static void parseLine(String t, int from, int to, Map<Long, Integer> out) {
        int i = skipSpaces(t, from, to);
        int colon = t.indexOf(':', i);
        if (colon < 0 || colon >= to || colon + 1 >= to || t.charAt(colon + 1) != ' ') {
            return; // the header line, or not a table line
        }
        int a = skipSpaces(t, colon + 1, to);
        int aEnd = t.indexOf(' ', a);
        if (aEnd < 0 || aEnd > to) {
            return;
        }
        int b = skipSpaces(t, aEnd, to);
        int bEnd = t.indexOf(' ', b);
        if (bEnd < 0 || bEnd > to) {
            return;
        }
        int c = skipSpaces(t, bEnd, to);
        int lp = hex(t, t.lastIndexOf(':', aEnd - 1) + 1, aEnd);
        int rp = hex(t, t.lastIndexOf(':', bEnd - 1) + 1, bEnd);
        int st = hex(t, c, Math.min(to, c + 2));
        if (lp < 0 || rp < 0 || st < 0) {
            return;
        }
        out.merge(key(lp, rp), st, (x, y) -> x == ESTABLISHED || y == ESTABLISHED ? ESTABLISHED : y);
    }

    private static int skipSpaces(String t, int i, int to) {
        while (i < to && t.charAt(i) == ' ') {
            i++;
        }
        return i;
    }

    /** The hexadecimal number in {@code t[from, to)}, or -1. */
    private static int hex(String t, int from, int to) {
        if (from <= 0 || from >= to || to - from > 7) {
            return -1;
        }
        int v = 0;
        for (int i = from; i < to; i++) {
            int d = Character.digit(t.charAt(i), 16);
            if (d < 0) {
                return -1;
            }
            v = v * 16 + d;
        }
        return v;
    }

    @Override
    public void close() {
        closed = true;
        LockSupport.unpark(thread);
        watches.clear();
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "ClientWatch[%s, %d watched]", enabled ? "on" : "off", watches.size());
    }
}
