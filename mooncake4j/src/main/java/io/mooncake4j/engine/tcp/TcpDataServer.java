package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.PortBinder;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The target side of the TCP transport (Mooncake {@code ServerSession}): a listener on the data
 * port; a busy connection is served on a pooled platform thread ({@code mooncake-target-tcp-N-pM},
 * 64 KiB pooled buffers; virtual threads beyond 1024 busy connections), and a connection that
 * receives nothing for {@value #GRACE_MS} ms waits for its next request in one selector
 * ({@code mooncake-target-idle-N}) holding no thread and no buffer. So both Mooncake's one-shot
 * clients (a connection per request, many at once) and persistent lanes are served, and idle
 * connections cost no platform thread.
 *
 * <p>Sockets stay non-blocking for their whole life (no mode switch, no timed read per request):
 * a busy session reads and writes until the call would block, and then waits in the selector that
 * comes with its pooled buffers ({@link IoBuffers#selector}; the grace period is that selector's
 * timeout). Closing a session from another thread (reaper, cap, unregistration, {@link #close()})
 * wakes that selector. GPU requests and the linger after a rejection switch the socket to blocking
 * mode for their duration.
 * Limits ({@link TcpConfig}): a connection idle (waiting for a header, or stalled inside a request
 * with no byte moved) for longer than {@link TcpConfig#dataIdleTimeoutMs()} is closed by the reaper
 * ({@code mooncake-target-reaper-N}, a virtual thread); at most {@link TcpConfig#maxDataConnections()}
 * are open: one more first closes the longest-idle one, and is itself closed at once when none is idle.
 * Per request:
 *
 * <ol>
 *   <li>read the 24-byte header; EOF at a header boundary ends the session quietly;</li>
 *   <li>validate: size &gt; 0, {@code addr + size} does not wrap, the range lies inside one
 *       registered buffer, opcode (bits 0-6) is READ or WRITE — otherwise v2 sends
 *       {@code ADDR_REJECTED} and closes, v1 closes; no memory is touched;</li>
 *   <li>WRITE: read the body straight into registered memory; v2 then sends {@code OK};</li>
 *   <li>READ: v2 sends {@code OK}, then the body straight from registered memory.</li>
 * </ol>
 *
 * Any I/O error (a peer disconnecting mid-body) ends that session only. Thread-safe;
 * {@link #close()} closes the listener and every session. Each connection's request loop is a
 * {@link DataSession}; this class owns the listener, the session set, the idle selector, the reaper,
 * the caps and the buffer pool the sessions share.
 *
 * <p>Divergence: Mooncake serves any opcode other than WRITE as a READ; this server rejects
 * opcodes other than 0 and 1 (no C++ client sends them).
 */
final class TcpDataServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TcpDataServer.class);
    private static final AtomicInteger SERVERS = new AtomicInteger();

    final LocalMemory memory;
    private final ServerSocketChannel listener;
    private final Thread acceptor;
    private final Thread reaper;
    private final Thread idleThread;
    final java.nio.channels.Selector idleSelector;
    final java.util.concurrent.ConcurrentLinkedQueue<DataSession> toRegister =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    final java.util.concurrent.ConcurrentLinkedQueue<DataSession> toEnd =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    final Set<DataSession> sessions = ConcurrentHashMap.newKeySet();
    private final AtomicLong sessionCounter = new AtomicLong();
    final AtomicLong rejected = new AtomicLong();
    /** Requests refused because they carried this engine's own tag (they came from this engine itself). */
    final AtomicLong selfRefused = new AtomicLong();
    /** This engine's tag ({@link TcpWire#tag}); 0: none known, nothing refused for it. */
    volatile long ownTag;
    final AtomicLong idleClosed = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final int serial = SERVERS.getAndIncrement();
    private final long idleTimeoutNanos;
    private final int maxConnections;
    volatile boolean closed;

    /**
     * Busy sessions run on pooled platform threads (blocking socket I/O without virtual-thread
     * park/unpark per read is markedly faster, and allocates nothing per request); a session that
     * gets no bytes for {@link #GRACE_MS} moves to a virtual thread until its next request.
     */
    final ThreadPoolExecutor sessionPool;

    private TcpDataServer(LocalMemory memory, ServerSocketChannel listener, long idleTimeoutMs, int maxConnections,
            boolean gatherWrites) throws IOException {
        this.gatherWrites = gatherWrites && GatherWriter.unavailableReason() == null;
        this.sessionPool = new ThreadPoolExecutor(0, MAX_PLATFORM_SESSIONS, 5, TimeUnit.SECONDS,
                new SynchronousQueue<>(), r -> Thread.ofPlatform().daemon(true)
                        .name("mooncake-target-tcp-" + serial + "-p" + sessionCounter.getAndIncrement())
                        .unstarted(r));
        this.memory = memory;
        this.listener = listener;
        this.idleTimeoutNanos = TimeUnit.MILLISECONDS.toNanos(idleTimeoutMs);
        this.maxConnections = maxConnections;
        this.acceptor = Thread.ofPlatform().daemon(true).name("mooncake-target-accept-" + serial)
                .unstarted(this::acceptLoop);
        this.reaper = Thread.ofVirtual().name("mooncake-target-reaper-" + serial).unstarted(this::reapLoop);
        this.idleSelector = java.nio.channels.Selector.open();
        this.idleThread = Thread.ofPlatform().daemon(true).name("mooncake-target-idle-" + serial)
                .unstarted(this::idleLoop);
    }

    /** Binds the data port with the default idle timeout and connection cap (tests). */
    static TcpDataServer start(HandshakeConfig cfg, LocalMemory memory) throws IOException {
        return start(cfg, memory, TcpConfig.DEFAULT_DATA_IDLE_TIMEOUT_MS, TcpConfig.DEFAULT_MAX_DATA_CONNECTIONS, true);
    }

    /** Binds the data port (same random range as the RPC port) and starts accepting. */
    static TcpDataServer start(HandshakeConfig cfg, LocalMemory memory, long idleTimeoutMs, int maxConnections,
            boolean gatherWrites) throws IOException {
        ServerSocketChannel ch = PortBinder.bind(cfg, addr -> {
            ServerSocketChannel s = ServerSocketChannel.open();
            try {
                s.bind(addr, Math.max(cfg.backlog(), 1024));
                return s;
            } catch (IOException e) {
                s.close();
                throw e;
            }
        });
        TcpDataServer server = new TcpDataServer(memory, ch, idleTimeoutMs, maxConnections, gatherWrites);
        server.idleThread.start();
        server.acceptor.start();
        server.reaper.start();
        return server;
    }

    int port() {
        return listener.socket().getLocalPort();
    }

    /** Requests rejected so far (outside registered memory, bad opcode). */
    long rejectedRequests() {
        return rejected.get();
    }

    /** Sessions currently open. */
    int openSessions() {
        return sessions.size();
    }

    /** Sessions closed so far because they were idle past the idle timeout (or made room at the cap). */
    long idleClosedSessions() {
        return idleClosed.get();
    }

    /** Connections closed at once so far because the cap was reached and no session was idle. */
    long refusedConnections() {
        return refused.get();
    }

    /** Closes sessions idle past the timeout; runs every quarter timeout (at most 1 s, at least 10 ms). */
    private void reapLoop() {
        long period = Math.max(TimeUnit.MILLISECONDS.toNanos(10), Math.min(TimeUnit.SECONDS.toNanos(1),
                idleTimeoutNanos / 4));
        while (!closed) {
            long now = System.nanoTime();
            for (DataSession s : sessions) {
                if (now - s.lastActive >= idleTimeoutNanos && s.idleCandidate()) {
                    idleClosed.incrementAndGet();
                    LOG.debug("data session {} idle for more than {} ms; closing", s.name,
                            TimeUnit.NANOSECONDS.toMillis(idleTimeoutNanos));
                    closeSession(s);
                }
            }
            java.util.concurrent.locks.LockSupport.parkNanos(this, period);
        }
    }

    /** At the cap: closes the longest-idle session; false when none is idle. */
    boolean makeRoom() {
        DataSession oldest = null;
        for (DataSession s : sessions) {
            if (s.waitingForHeader && (oldest == null || s.lastActive - oldest.lastActive < 0)) {
                oldest = s;
            }
        }
        if (oldest == null) {
            return false;
        }
        idleClosed.incrementAndGet();
        closeSession(oldest);
        sessions.remove(oldest);
        return true;
    }

    /**
     * Closes a session: an idle one is released by the idle selector thread, a busy one by its
     * serving thread (whose blocked I/O fails).
     */
    void closeSession(DataSession s) {
        s.abort();
        if (s.state.compareAndSet(DataSession.IDLE, DataSession.CLOSING)) {
            toEnd.add(s);
            idleSelector.wakeup();
        }
    }

    /**
     * The idle selector ({@code mooncake-target-idle-N}, one platform thread per data port): sessions
     * waiting for their next request are registered here; when one becomes readable it is handed to
     * a pooled platform thread.
     */
    private void idleLoop() {
        List<DataSession> ready = new ArrayList<>();
        try {
            while (!closed) {
                idleSelector.select(1000);
                DataSession s;
                while ((s = toRegister.poll()) != null) {
                    try {
                        s.ch.register(idleSelector, java.nio.channels.SelectionKey.OP_READ, s);
                    } catch (IOException | RuntimeException e) {
                        LOG.debug("data session {}: cannot wait for its next request: {}", s.name, e.toString());
                        s.end();
                    }
                }
                while ((s = toEnd.poll()) != null) {
                    java.nio.channels.SelectionKey k = s.ch.keyFor(idleSelector);
                    if (k != null) {
                        k.cancel();
                    }
                    s.end();
                }
                for (java.nio.channels.SelectionKey k : idleSelector.selectedKeys()) {
                    DataSession r = (DataSession) k.attachment();
                    k.cancel();
                    if (r.state.compareAndSet(DataSession.IDLE, DataSession.BUSY)) {
                        ready.add(r);
                    }
                }
                idleSelector.selectedKeys().clear();
                if (ready.isEmpty()) {
                    continue;
                }
                idleSelector.selectNow(); // deregisters the cancelled keys (a session may park again at once)
                for (DataSession r : ready) {
                    r.waitingForHeader = false;
                    r.lastActive = System.nanoTime();
                    try {
                        sessionPool.execute(r::busyPhase);
                    } catch (RejectedExecutionException e) {
                        // all platform threads busy, or closing: serve on a virtual thread
                        r.thread = Thread.ofVirtual().name(r.name).start(r::busyPhase);
                    }
                }
                ready.clear();
            }
        } catch (IOException | RuntimeException e) {
            if (!closed) {
                LOG.error("data port {}: the idle selector failed; idle connections are closed", port(), e);
            }
        } finally {
            for (java.nio.channels.SelectionKey k : idleSelector.keys()) {
                ((DataSession) k.attachment()).end();
            }
            DataSession s;
            while ((s = toRegister.poll()) != null) {
                s.end();
            }
            while ((s = toEnd.poll()) != null) {
                s.end();
            }
            try {
                idleSelector.close();
            } catch (IOException e) {
                LOG.debug("closing the idle selector: {}", e.getMessage());
            }
        }
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel c;
            try {
                c = listener.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.error("data listener on port {} failed; no more connections will be accepted", port(), e);
                }
                return;
            }
            try {
                c.setOption(StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException e) {
                LOG.debug("TCP_NODELAY: {}", e.getMessage());
            }
            try {
                c.configureBlocking(false); // for good: busy sessions wait in their selector, idle ones in the idle one
            } catch (IOException e) {
                LOG.debug("data connection: cannot switch to non-blocking mode: {}", e.getMessage());
                try {
                    c.close();
                } catch (IOException e2) {
                    LOG.debug("close: {}", e2.getMessage());
                }
                continue;
            }
            if (sessions.size() >= maxConnections && !makeRoom()) {
                if (refused.incrementAndGet() <= 10) {
                    LOG.warn("data port {}: {} connections open, none idle (MOONCAKE4J_TCP_DATA_MAX_CONNECTIONS); "
                            + "closing a new one", port(), sessions.size());
                }
                try {
                    c.close();
                } catch (IOException e) {
                    LOG.debug("close: {}", e.getMessage());
                }
                continue;
            }
            DataSession s = new DataSession(this, c, "mooncake-target-tcp-" + serial + "-" + sessionCounter.getAndIncrement());
            sessions.add(s);
            if (closed) {
                s.abort();
                sessions.remove(s);
                return;
            }
            s.parkIdle();
        }
    }

    private static final int MAX_PLATFORM_SESSIONS = 1024;
    /** How long a busy session waits for its next request on its thread before it moves to the idle selector. */
    static final int GRACE_MS = 50;
    /** Rejections logged at WARN per server; later ones at DEBUG. */
    static final int WARN_LIMIT = 20;
    /** Body remainders at least this large are read straight into registered memory. */
    static final int DIRECT_THRESHOLD = 32 * 1024;
    /** WRITE status frames queued at most before they are written even though more requests are readable. */
    static final int STATUS_BATCH = 8;
    /** Whether READ responses are gathered into one {@code sendmsg} ({@link GatherWriter}). */
    final boolean gatherWrites;

    /**
     * A session's socket buffers: input is read in large chunks and parsed (headers and small
     * bodies of pipelined requests come in one {@code read}); status frames and small READ bodies
     * are gathered and written when the session would otherwise block; and the selector the busy
     * session waits in when its socket would block. Held by one busy session at a time, pooled.
     */
    static final class IoBuffers {
        final ByteBuffer in = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN);
        final ByteBuffer out = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN);
        final MemorySegment inSegment = MemorySegment.ofBuffer(in);
        final MemorySegment outSegment = MemorySegment.ofBuffer(out);
        final long outAddress = outSegment.address();
        /** Holds at most the key of the session holding these buffers (none while pooled). */
        final java.nio.channels.Selector selector;
        /**
         * READ responses gathered (status frames in {@code out}, bodies in place) into one
         * {@code sendmsg}; null when off. Bound to the holding session's socket, unbound when pooled.
         */
        final GatherWriter gather;

        IoBuffers(boolean gather) throws IOException {
            selector = java.nio.channels.Selector.open();
            this.gather = gather ? new GatherWriter() : null;
        }
    }

    /** Every {@link IoBuffers} made, for closing their selectors in {@link #close()}. */
    final java.util.concurrent.ConcurrentLinkedQueue<IoBuffers> allIo =
            new java.util.concurrent.ConcurrentLinkedQueue<>();

    /** Buffers of sessions waiting for their next header, for the next busy session (bounded by the busy peak). */
    final java.util.concurrent.ConcurrentLinkedQueue<IoBuffers> ioPool =
            new java.util.concurrent.ConcurrentLinkedQueue<>();

    IoBuffers borrowIo() throws IOException {
        IoBuffers io = ioPool.poll();
        if (io == null) {
            io = new IoBuffers(gatherWrites);
            allIo.add(io);
            if (closed) {
                io.selector.close();
            }
        }
        io.in.clear().flip();
        io.out.clear();
        return io;
    }


    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            LOG.debug("closing data listener: {}", e.getMessage());
        }
        join(acceptor);
        java.util.concurrent.locks.LockSupport.unpark(reaper);
        join(reaper);
        idleSelector.wakeup();
        join(idleThread);
        for (DataSession s : sessions) {
            s.abort();
        }
        sessionPool.shutdown();
        try {
            if (!sessionPool.awaitTermination(10, TimeUnit.SECONDS)) {
                LOG.error("data sessions on port {} did not stop within 10 s", port());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (DataSession s : sessions) {
            Thread t = s.thread;
            if (t != null) {
                join(t);
            }
        }
        for (IoBuffers b : allIo) {
            try {
                b.selector.close();
            } catch (IOException e) {
                LOG.debug("closing a session selector: {}", e.getMessage());
            }
        }
    }

    private static void join(Thread t) {
        try {
            if (!t.join(Duration.ofSeconds(10))) {
                LOG.error("thread {} did not stop within 10 s", t.getName());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
