package io.mooncake4j.engine.tcp;

// Over 800 lines: the data port's server is one connection state machine (accept, busy sessions
// on non-blocking sockets and their per-buffer selectors, the idle selector, the reaper, caps,
// unregistration, GPU staging) whose parts hand one connection between them; the invariants
// (a connection holds a thread or a buffer only while busy) are easier to keep in one file.

import io.mooncake4j.engine.BufferRegistry.Buffer;
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
 * {@link #close()} closes the listener and every session.
 *
 * <p>Divergence: Mooncake serves any opcode other than WRITE as a READ; this server rejects
 * opcodes other than 0 and 1 (no C++ client sends them).
 */
final class TcpDataServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TcpDataServer.class);
    private static final AtomicInteger SERVERS = new AtomicInteger();

    private final LocalMemory memory;
    private final ServerSocketChannel listener;
    private final Thread acceptor;
    private final Thread reaper;
    private final Thread idleThread;
    private final java.nio.channels.Selector idleSelector;
    private final java.util.concurrent.ConcurrentLinkedQueue<Session> toRegister =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.concurrent.ConcurrentLinkedQueue<Session> toEnd =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();
    private final AtomicLong sessionCounter = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong idleClosed = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final int serial = SERVERS.getAndIncrement();
    private final long idleTimeoutNanos;
    private final int maxConnections;
    private volatile boolean closed;

    /**
     * Busy sessions run on pooled platform threads (blocking socket I/O without virtual-thread
     * park/unpark per read is markedly faster, and allocates nothing per request); a session that
     * gets no bytes for {@link #GRACE_MS} moves to a virtual thread until its next request.
     */
    private final ThreadPoolExecutor sessionPool;

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
            for (Session s : sessions) {
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
    private boolean makeRoom() {
        Session oldest = null;
        for (Session s : sessions) {
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
    private void closeSession(Session s) {
        s.abort();
        if (s.state.compareAndSet(Session.IDLE, Session.CLOSING)) {
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
        List<Session> ready = new ArrayList<>();
        try {
            while (!closed) {
                idleSelector.select(1000);
                Session s;
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
                    Session r = (Session) k.attachment();
                    k.cancel();
                    if (r.state.compareAndSet(Session.IDLE, Session.BUSY)) {
                        ready.add(r);
                    }
                }
                idleSelector.selectedKeys().clear();
                if (ready.isEmpty()) {
                    continue;
                }
                idleSelector.selectNow(); // deregisters the cancelled keys (a session may park again at once)
                for (Session r : ready) {
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
                ((Session) k.attachment()).end();
            }
            Session s;
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
            Session s = new Session(c, "mooncake-target-tcp-" + serial + "-" + sessionCounter.getAndIncrement());
            sessions.add(s);
            if (closed) {
                s.abort();
                sessions.remove(s);
                return;
            }
            s.parkIdle();
        }
    }

    private static final int LINGER_MS = 2000;
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
    private final boolean gatherWrites;

    /**
     * A session's socket buffers: input is read in large chunks and parsed (headers and small
     * bodies of pipelined requests come in one {@code read}); status frames and small READ bodies
     * are gathered and written when the session would otherwise block; and the selector the busy
     * session waits in when its socket would block. Held by one busy session at a time, pooled.
     */
    private static final class IoBuffers {
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
    private final java.util.concurrent.ConcurrentLinkedQueue<IoBuffers> allIo =
            new java.util.concurrent.ConcurrentLinkedQueue<>();

    /** Buffers of sessions waiting for their next header, for the next busy session (bounded by the busy peak). */
    private final java.util.concurrent.ConcurrentLinkedQueue<IoBuffers> ioPool =
            new java.util.concurrent.ConcurrentLinkedQueue<>();

    private IoBuffers borrowIo() throws IOException {
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

    private final class Session {
        final SocketChannel ch;
        final String name;
        final LocalMemory.Slot slot;
        volatile Thread thread;
        /** When a byte last moved or the session last went idle (System.nanoTime). */
        volatile long lastActive = System.nanoTime();
        /** Whether the session waits for a request header with nothing in flight. */
        volatile boolean waitingForHeader;

        Session(SocketChannel ch, String name) {
            this.ch = ch;
            this.name = name;
            this.slot = memory.slot(this::abort);
        }

        /** Whether the reaper may close this session once no byte moved for the idle timeout (while open). */
        boolean idleCandidate() {
            return ch.isOpen();
        }

        void lingerAndDiscard() {
            try {
                blocking(true); // the linger reads with a timeout through the socket's stream
            } catch (IOException | RuntimeException e) {
                LOG.debug("linger after rejection: {}", e.toString());
                return;
            }
            lingerAndDiscardOn(ch);
        }

        void abort() {
            try {
                ch.close();
            } catch (IOException e) {
                LOG.debug("close: {}", e.getMessage());
            }
            java.nio.channels.Selector w = waitingIn;
            if (w != null) {
                w.wakeup(); // a busy session waiting for its socket sees the close
            }
        }

        /** Session states: owned by a serving thread, waiting in the idle selector, or being closed from idle. */
        static final int BUSY = 0;
        static final int IDLE = 1;
        static final int CLOSING = 2;
        final java.util.concurrent.atomic.AtomicInteger state = new java.util.concurrent.atomic.AtomicInteger(BUSY);
        private final java.util.concurrent.atomic.AtomicBoolean ended = new java.util.concurrent.atomic.AtomicBoolean();

        /** Hands the session to the idle selector until its next request (no thread, no buffers held). */
        void parkIdle() {
            waitingForHeader = true;
            lastActive = System.nanoTime();
            state.set(IDLE);
            toRegister.add(this);
            idleSelector.wakeup();
        }

        /** Busy phase, on a pooled platform thread: serves requests until EOF or a pause past the grace period. */
        private void busyPhase() {
            thread = Thread.currentThread();
            boolean handedOff = false;
            try {
                if (peer == null) {
                    peer = String.valueOf(ch.getRemoteAddress());
                }
                handedOff = serve();
            } catch (IOException e) {
                if (!closed) {
                    LOG.debug("data session with {} ended: {}", peer, e.toString());
                }
            } catch (RuntimeException | Error e) {
                LOG.error("data session with {} failed", peer, e);
                throw e;
            } finally {
                // after a hand-off the session belongs to the idle selector (its buffers are back in the pool)
                if (!handedOff) {
                    releaseIo();
                    end();
                }
            }
        }

        /** Releases the session; idempotent. */
        void end() {
            if (!ended.compareAndSet(false, true)) {
                return;
            }
            slot.close();
            abort();
            sessions.remove(this);
        }

        final LocalMemory.Views views = new LocalMemory.Views(memory);
        private String peer;
        private IoBuffers io;
        /** The selector this session's thread waits in (its buffers' one), for {@link #abort()} to wake. */
        private volatile java.nio.channels.Selector waitingIn;
        /** This session's key in {@code io.selector}, null when not registered there. */
        private java.nio.channels.SelectionKey key;

        /** Returns the buffers to the pool, first taking this channel out of their selector. */
        private void releaseIo() {
            IoBuffers b = io;
            if (b == null) {
                return;
            }
            io = null;
            waitingIn = null;
            if (b.gather != null) {
                b.gather.unbind(); // this thread's duplicate of the socket; nothing is queued after a flush
            }
            if (gatherBuf != null) {
                gatherBuf = null;
                slot.exit(0);
            }
            segStart = 0;
            if (deregister(b)) {
                ioPool.add(b);
            }
        }

        /** Cancels this session's key in {@code b}'s selector and flushes it; false when the selector is unusable. */
        private boolean deregister(IoBuffers b) {
            if (key == null) {
                return true;
            }
            key.cancel();
            key = null;
            try {
                b.selector.selectNow();
                return true;
            } catch (IOException | RuntimeException e) {
                LOG.debug("data session {}: selector: {}", name, e.toString());
                return false;
            }
        }

        /**
         * Waits until the socket is ready for {@code ops} ({@code OP_READ} or {@code OP_WRITE}), at most
         * {@code timeoutMs} (0: no limit; the session's close wakes it). True when ready, false on timeout.
         */
        private boolean await(int ops, long timeoutMs) throws IOException {
            try {
                return awaitIn(io.selector, ops, timeoutMs);
            } catch (java.nio.channels.ClosedSelectorException e) {
                throw new IOException("data port closed", e);
            }
        }

        private boolean awaitIn(java.nio.channels.Selector sel, int ops, long timeoutMs) throws IOException {
            if (key == null) {
                key = ch.register(sel, ops); // throws ClosedChannelException once closed
            } else if (key.interestOps() != ops) {
                key.interestOps(ops);
            }
            waitingIn = sel;
            try {
                if (!ch.isOpen()) {
                    throw new java.nio.channels.ClosedChannelException();
                }
                int n = timeoutMs > 0 ? sel.select(timeoutMs) : sel.select();
                sel.selectedKeys().clear();
                if (!ch.isOpen()) {
                    throw new java.nio.channels.ClosedChannelException();
                }
                return n > 0;
            } finally {
                waitingIn = null;
            }
        }

        /**
         * Reads at least one byte into {@code b} (which has room), waiting as needed; -1 on EOF.
         * Before it waits it writes what {@code out} holds: queued status frames go out only when
         * the session would otherwise block (or a batch is full), never held across a wait.
         */
        private int read(ByteBuffer b) throws IOException {
            while (true) {
                int r = ch.read(b);
                if (r != 0) {
                    if (r > 0) {
                        lastActive = System.nanoTime();
                    } else {
                        flushAtEof();
                    }
                    return r;
                }
                flush(io.out);
                await(java.nio.channels.SelectionKey.OP_READ, 0);
            }
        }

        /**
         * At EOF: writes the queued status frames, since a peer that half-closed still reads the
         * statuses of what it sent; one that is gone cannot, and that is not an error of its own
         * (the caller reports the EOF).
         */
        private void flushAtEof() {
            try {
                flush(io.out);
            } catch (IOException e) {
                LOG.debug("data session with {}: status frames not delivered at EOF: {}", peer, e.toString());
            }
        }

        /** WRITE status frames in {@code out} since the last flush, and the body bytes they acknowledge. */
        private int statusesQueued;
        private long statusBytes;

        /** Writes all of {@code b}, waiting as needed. */
        private void writeFully(ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                if (ch.write(b) > 0) {
                    lastActive = System.nanoTime();
                } else {
                    await(java.nio.channels.SelectionKey.OP_WRITE, 0);
                }
            }
        }

        /** Switches the socket to blocking mode for a GPU request or the linger (leaving the selector first). */
        private void blocking(boolean on) throws IOException {
            if (on && io != null && !deregister(io)) {
                throw new IOException("data session " + name + ": selector unusable");
            }
            ch.configureBlocking(on);
        }

        /**
         * Waits up to {@link #GRACE_MS} on this thread for the next request's first bytes (the common
         * case of a busy lane): true when readable, false when none came.
         */
        private boolean graceWait() throws IOException {
            waitingForHeader = true;
            lastActive = System.nanoTime();
            try {
                return await(java.nio.channels.SelectionKey.OP_READ, GRACE_MS);
            } finally {
                waitingForHeader = false;
                lastActive = System.nanoTime();
            }
        }

        /** Serves requests; true when the session paused and was handed to the idle selector, false at its end. */
        private boolean serve() throws IOException {
            io = borrowIo();
            segStart = 0;
            boolean lastLarge = false;
            while (!closed) {
                if (io.in.remaining() == 0) {
                    // what is already there (after a large request just its header, so that its body
                    // can go straight to memory); when nothing is, write what is queued and wait up
                    // to the grace period
                    int got = readNow(io.in, lastLarge ? TcpWire.HEADER_BYTES : io.in.capacity());
                    if (got == 0) {
                        flush(io.out);
                        if (graceWait()) {
                            got = readNow(io.in, lastLarge ? TcpWire.HEADER_BYTES : io.in.capacity());
                        }
                    }
                    if (got < 0) {
                        return false;
                    }
                    if (got == 0) {
                        releaseIo();
                        parkIdle();
                        return true;
                    }
                }
                IoBuffers io = this.io;
                ByteBuffer in = io.in;
                ByteBuffer out = io.out;
                if (in.remaining() < TcpWire.HEADER_BYTES) {
                    // after a large request expect another: read just the header so its body can go
                    // straight into memory; after small ones read ahead to pick up several at once
                    if (!fill(in, TcpWire.HEADER_BYTES, lastLarge ? TcpWire.HEADER_BYTES : in.capacity())) {
                        if (in.remaining() != 0) {
                            LOG.warn("data session with {}: connection closed inside a header ({} of 24 bytes)",
                                    peer, in.remaining());
                        }
                        return false;
                    }
                }
                int p = in.position();
                long size = in.getLong(p);
                long addr = in.getLong(p + 8);
                int opcode = in.get(p + 16) & 0xff;
                in.position(p + TcpWire.HEADER_BYTES);
                boolean v2 = (opcode & TcpWire.V2_FLAG) != 0;
                int op = opcode & 0x7f;
                // a large WRITE's body follows its header: read just the next header, so that body can
                // go straight to memory (after a READ only headers follow: read ahead)
                lastLarge = op == TcpWire.OP_WRITE && Long.compareUnsigned(size, DIRECT_THRESHOLD) >= 0;
                Buffer buf = (op == TcpWire.OP_READ || op == TcpWire.OP_WRITE) && TcpWire.validRange(addr, size)
                        ? memory.registry.find(addr, size) : null;
                if (buf != null && gatherBuf != null && buf != gatherBuf) {
                    flush(out); // slot position 0 holds one buffer: the queued bodies of another go first
                }
                if (buf == null || (buf != gatherBuf && !slot.enter(0, buf))) {
                    long n = rejected.incrementAndGet();
                    // WARN for the first ones, then DEBUG: a flood of bad requests must not flood the log
                    String fmt = "data session with {}: rejecting opcode 0x{} of {} bytes at 0x{}: {}; closing"
                            + (n == WARN_LIMIT ? " (further rejections at DEBUG; see rejectedDataRequests())" : "");
                    Object[] args = {peer, Integer.toHexString(opcode), Long.toUnsignedString(size),
                        Long.toHexString(addr), op > 1 ? "unknown opcode" : "outside registered memory"};
                    if (n <= WARN_LIMIT) {
                        LOG.warn(fmt, args);
                    } else {
                        LOG.debug(fmt, args);
                    }
                    if (v2) {
                        out.putLong(TcpWire.STATUS_ADDR_REJECTED);
                    }
                    flush(out);
                    lingerAndDiscard();
                    return false;
                }
                inRequest = true;
                try {
                    int dev = DeviceStaging.deviceOf(buf);
                    if (dev >= 0) {
                        if (!serveDevice(peer, in, io, out, dev, op, v2, addr, size)) {
                            return false;
                        }
                    } else if (op == TcpWire.OP_WRITE) {
                        if (!receiveBody(peer, in, io, out, views, buf, addr, size)) {
                            return false;
                        }
                        if (v2) {
                            if (out.remaining() < TcpWire.STATUS_BYTES) {
                                flush(out);
                            }
                            out.putLong(TcpWire.STATUS_OK);
                            // queued until the session would wait, or a batch's worth: the initiator's
                            // window keeps sending meanwhile, and one write carries several frames
                            statusBytes += size;
                            if (++statusesQueued >= STATUS_BATCH || statusBytes >= Lane.GATHER_BYTES) {
                                flush(out);
                            }
                        }
                    } else if (size > Lane.STAGE_LIMIT && size < Lane.GATHER_BYTES && gatherOn(io)) {
                        // status (v2) queued with the pending frames, the body in place: one sendmsg
                        // for the responses queued before the session would wait
                        if (out.remaining() < TcpWire.STATUS_BYTES || !io.gather.hasRoom(3)) {
                            flush(out);
                        }
                        if (v2) {
                            out.putLong(TcpWire.STATUS_OK);
                        }
                        io.gather.add(io.outAddress + segStart, out.position() - segStart);
                        segStart = out.position();
                        io.gather.add(addr, size);
                        gatherBuf = buf;
                        if (io.gather.pending() >= Lane.GATHER_BYTES) {
                            flush(out);
                        }
                    } else {
                        // status (v2) and the body's first bytes go out with the pending frames, the rest direct
                        int pre = v2 ? TcpWire.STATUS_BYTES : 0;
                        int first = (int) Math.min(size, Lane.STAGE_LIMIT);
                        if (out.remaining() < pre + first) {
                            flush(out);
                        }
                        if (v2) {
                            out.putLong(TcpWire.STATUS_OK);
                        }
                        MemorySegment.copy(LocalMemory.ALL, addr, io.outSegment, out.position(), first);
                        out.position(out.position() + first);
                        long done = first;
                        if (done < size) {
                            flush(out);
                        }
                        while (done < size) {
                            ByteBuffer body = views.view(buf, addr + done, size - done);
                            int n = body.remaining();
                            writeFully(body);
                            done += n;
                        }
                    }
                } finally {
                    inRequest = false;
                    if (gatherBuf == null) {
                        slot.exit(0);
                    }
                }
            }
            return false;
        }

        /** Whether READ responses can be gathered on this session's socket (binding the writer when needed). */
        private boolean gatherOn(IoBuffers b) {
            return b.gather != null && b.gather.use(ch, name);
        }

        /**
         * Serves a request on GPU memory through a pooled stager (waiting for one when all are busy):
         * a WRITE body goes socket → bounce buffer → device, then the v2 status is queued; a READ
         * sends the v2 status, then the body device → bounce buffer → socket. False when the session
         * must end (peer gone, copy failed: the initiator sees the connection close and fails the
         * request).
         */
        private boolean serveDevice(String peer, ByteBuffer in, IoBuffers io, ByteBuffer out, int dev, int op,
                boolean v2, long addr, long size) throws IOException {
            flush(out);
            Stager st = memory.staging.borrow();
            if (st == null) {
                return false;
            }
            blocking(true); // the stager's copies loop on blocking reads and writes
            try {
                int rc;
                if (op == TcpWire.OP_WRITE) {
                    rc = st.receive(ch, in, io.inSegment, dev, addr, size);
                    if (rc == Stager.OK && v2) {
                        out.putLong(TcpWire.STATUS_OK);
                    }
                } else {
                    if (v2) {
                        out.putLong(TcpWire.STATUS_OK);
                        flush(out);
                    }
                    rc = st.send(ch, dev, addr, size);
                }
                if (rc == Stager.EOF) {
                    LOG.warn("data session with {}: connection closed inside the body of a {}-byte write to cuda:{} "
                            + "at 0x{}", peer, size, dev, Long.toHexString(addr));
                } else if (rc != Stager.OK) {
                    LOG.warn("data session with {}: GPU copy for a {} of {} bytes at 0x{} (cuda:{}) failed ({}); "
                            + "closing", peer, op == TcpWire.OP_WRITE ? "write" : "read", size,
                            Long.toHexString(addr), dev, rc);
                }
                if (rc == Stager.OK) {
                    blocking(false);
                }
                return rc == Stager.OK;
            } finally {
                memory.staging.release(st);
            }
        }

        /** Moves a WRITE body into memory: buffered bytes first, large remainders straight from the socket. */
        private boolean receiveBody(String peer, ByteBuffer in, IoBuffers io, ByteBuffer out,
                LocalMemory.Views views, Buffer buf, long addr, long size) throws IOException {
            long done = 0;
            while (done < size) {
                int avail = in.remaining();
                if (avail > 0) {
                    int n = (int) Math.min(avail, size - done);
                    MemorySegment.copy(io.inSegment, in.position(), LocalMemory.ALL, addr + done, n);
                    in.position(in.position() + n);
                    done += n;
                    continue;
                }
                long left = size - done;
                int r;
                if (left >= DIRECT_THRESHOLD) {
                    // not a scattering read of the body and the next header: NIO allocates 40 B per
                    // call for a memory segment's view, and neither it nor an allocation-free readv
                    // through FFM (half the system calls) made WRITEs faster (docs/performance.md,
                    // eighth and ninth sessions)
                    r = read(views.view(buf, addr + done, left));
                    if (r > 0) {
                        done += r;
                    }
                } else {
                    in.clear();
                    r = read(in);
                    in.flip();
                }
                if (r < 0) {
                    LOG.warn("data session with {}: connection closed after {} of {} body bytes of a write to 0x{}",
                            peer, done, size, Long.toHexString(addr));
                    return false;
                }
            }
            return true;
        }

        /**
         * Reads until at least {@code need} bytes are buffered, holding at most {@code max}; false on
         * EOF. {@code in} stays in read mode.
         */
        private boolean fill(ByteBuffer in, int need, int max) throws IOException {
            in.compact();
            in.limit(Math.max(need, Math.min(max, in.capacity())));
            try {
                while (in.position() < need) {
                    if (read(in) < 0) {
                        return false;
                    }
                }
                return true;
            } finally {
                in.flip();
            }
        }

        /**
         * With {@code in} empty: reads what the socket holds now, at most {@code max} bytes, without
         * waiting; the count (0 when nothing is there), -1 on EOF. {@code in} stays in read mode.
         */
        private int readNow(ByteBuffer in, int max) throws IOException {
            in.clear().limit(Math.min(max, in.capacity()));
            int r;
            try {
                r = ch.read(in);
            } finally {
                in.flip();
            }
            if (r > 0) {
                lastActive = System.nanoTime();
            } else if (r < 0) {
                flushAtEof();
            }
            return r;
        }

        // gathered READ responses (sender is this session's thread only)
        /** Start of the {@code out} bytes not yet queued as a piece. */
        private int segStart;
        /** The buffer of the queued bodies, claimed in slot position 0 until written; null when none. */
        private Buffer gatherBuf;
        /** Whether serve() holds slot position 0 for the request it works on. */
        private boolean inRequest;

        private void flush(ByteBuffer out) throws IOException {
            statusesQueued = 0;
            statusBytes = 0;
            GatherWriter g = io.gather;
            if (g != null && !g.isEmpty()) {
                g.add(io.outAddress + segStart, out.position() - segStart);
                while (!g.isEmpty()) {
                    if (g.writeOnce() > 0) {
                        lastActive = System.nanoTime();
                    } else {
                        await(java.nio.channels.SelectionKey.OP_WRITE, 0);
                    }
                }
                out.clear();
                segStart = 0;
                if (gatherBuf != null) {
                    gatherBuf = null;
                    if (!inRequest) {
                        slot.exit(0);
                    }
                }
                return;
            }
            if (out.position() == 0) {
                return;
            }
            out.flip();
            writeFully(out);
            out.clear();
        }
    }

    /**
     * After a rejection: half-close and discard what the peer still sends (a WRITE body) until it
     * closes, for at most {@link #LINGER_MS}, so the kernel does not answer unread data with a
     * reset that could destroy the rejection status frame before the peer read it.
     */
    private void lingerAndDiscardOn(SocketChannel ch) {
        try {
            ch.shutdownOutput();
            ch.socket().setSoTimeout(LINGER_MS);
            java.io.InputStream in = ch.socket().getInputStream();
            byte[] sink = new byte[16384];
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LINGER_MS);
            while (System.nanoTime() < deadline && in.read(sink) >= 0) {
                // discard
            }
        } catch (IOException e) {
            LOG.debug("linger after rejection: {}", e.getMessage());
        }
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
        for (Session s : sessions) {
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
        for (Session s : sessions) {
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
