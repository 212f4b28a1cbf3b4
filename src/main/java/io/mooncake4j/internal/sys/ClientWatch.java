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
 * {@code period} while connections are registered: a connection whose peer closed it ({@code CLOSE_WAIT},
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
    private final boolean enabled;
    private final Set<Watch> watches = ConcurrentHashMap.newKeySet();
    private final Thread thread;
    private volatile boolean closed;

    /**
     * Starts the watcher thread (when a TCP table is readable).
     *
     * @param period how often the table is read while connections are watched
     * @param name   the watcher thread's name
     */
    public ClientWatch(Duration period, String name) {
        this.period = period;
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
        for (String line : table.split("\n")) {
            String[] f = line.trim().split("\\s+");
            // sl local_address rem_address st ...
            if (f.length < 4 || !f[0].endsWith(":")) {
                continue;
            }
            int lp = port(f[1]);
            int rp = port(f[2]);
            if (lp < 0 || rp < 0) {
                continue;
            }
            int st;
            try {
                st = Integer.parseInt(f[3], 16);
            } catch (NumberFormatException e) {
                continue;
            }
            out.merge(key(lp, rp), st, (a, b) -> a == ESTABLISHED || b == ESTABLISHED ? ESTABLISHED : b);
        }
    }

    private static int port(String hexAddress) {
        int colon = hexAddress.lastIndexOf(':');
        if (colon < 0) {
            return -1;
        }
        try {
            return Integer.parseInt(hexAddress.substring(colon + 1), 16);
        } catch (NumberFormatException e) {
            return -1;
        }
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
