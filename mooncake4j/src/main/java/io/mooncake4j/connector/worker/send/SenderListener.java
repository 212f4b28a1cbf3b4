package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.loop.SelectorLoop;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.internal.zmtp.ZmtpConnection;
import io.mooncake4j.internal.zmtp.ZmtpException;
import io.mooncake4j.internal.zmtp.ZmtpLimits;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.Pipe;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The producer's side channel (vLLM's {@code _mooncake_sender_listener} plus the sender loop) on our own
 * ZMTP 3.1 ({@code io.mooncake4j.internal.zmtp}): a ROUTER served by {@code mooncake-p-listener-0} itself,
 * with no I/O thread in between (JeroMQ, which it used to run on, cost a thread wake-up per
 * hand-off and spun the I/O thread it had just signalled).
 *
 * <p>Threads: {@code mooncake-p-listener-0} owns the selector, the listening channel and every
 * connection; it reads, decodes, and hands each message to {@code mooncake-p-sender-0} (the
 * {@link SenderLoop} this listener holds), where the {@link SideChannelHandler} runs. Replies from any thread go into a queue and wake the listener
 * through a {@link Pipe} registered with its selector; the listener routes them by identity.
 *
 * <p>Unlike vLLM (spec §15 #6) nothing a peer sends ends the listener: a message with the wrong
 * frame count is counted and delivered, an exception in the handler or the loop is logged once
 * per distinct error and counted.
 *
 * <p>ROUTER semantics: each connection gets the peer's READY {@code Identity} when it is non-empty and
 * not in use (a second connection announcing an identity in use is refused, as a ROUTER without
 * handover does), else a generated one (a zero byte and a 4-byte counter). A reply to an identity no
 * connection has (any more), or to a connection whose out-queue is full, is dropped and counted.
 *
 * <p><b>Bounds.</b> A frame or message above {@link ChannelLimits#maxMetadataBytes()} (checked on
 * the frame header, before anything is allocated), any ZMTP violation, a handshake not done within
 * {@link #HANDSHAKE_MS} (a peer that connects and sends nothing does not keep its slot), and
 * connections beyond {@link #MAX_CONNECTIONS} (unless the peer idle the longest gives its slot up,
 * {@link #IDLE_EVICT_MS}) are closed and counted ({@link ListenerStats#peersDropped()}).
 * Messages handed to the sender loop and not yet handled are bounded in bytes ({@code backlogBudget}):
 * above it the listener stops reading (no OP_READ: TCP pushes back on the peers) until the handler
 * task that brings the backlog under the budget wakes it. Each connection's out-queue is bounded
 * ({@link ZmtpLimits}). An {@link Error} escaping the loop is reported to the {@link HealthMonitor}; the
 * pulls are quiesced ({@link Quiesce#await}) and the listener listens again on the same port.
 */
public final class SenderListener implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(SenderListener.class);

    /** Poll bound, so a lost wake-up can never delay shutdown by more than this. */
    public static final long POLL_MS = 100;
    /** How long a reset or close waits for running writes before it closes the port anyway. */
    static final long QUIESCE_MS = 30_000;

    /** A peer that has not completed its ZMTP handshake after this long is disconnected. */
    static final long HANDSHAKE_MS = 10_000;
    /** Connections served at once (handshaking ones included); see {@link #IDLE_EVICT_MS} for one more. */
    static final int MAX_CONNECTIONS = 1024;
    /**
     * At the connection cap a new connection takes the slot of the peer idle the longest, if one has been
     * idle this long and is owed nothing (its last request, if any, was answered); else it is closed. So
     * peers that connect, handshake and go quiet cannot keep new D workers out, while a pull waiting for
     * its answer keeps its connection.
     */
    static final long IDLE_EVICT_MS = 10_000;
    private static final int ACCEPT_BATCH = 64;
    private static final long JOIN_MS = 5_000;
    private static final long REBIND_MS = 10_000;
    private static final int MAX_DISTINCT_ERRORS = 1024;

    /** A reply to a message that arrived on {@code origin}; {@code last}: the message's final answer. */
    private record Reply(Peer origin, byte[] payload, boolean last) {}

    /** Why a peer's connection ended: what its unsent final answers are counted as. */
    private enum Gone { PEER, PROTOCOL, CLOSING }

    /** An identity as a map key. */
    private record Key(byte[] id) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && Arrays.equals(id, k.id);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(id);
        }

        @Override
        public String toString() {
            return Arrays.toString(id);
        }
    }

    /** One connected peer (listener thread only). */
    private static final class Peer {
        final ZmtpConnection conn;
        final long handshakeDeadline;
        SelectionKey key;
        byte[] identity; // set once its READY was accepted
        boolean closed;
        long lastActive; // a read or a reply sent, System.nanoTime()
        boolean owed; // a message completed after the last reply sent to it
        Gone gone = Gone.PEER; // why it was closed, once closed

        Peer(ZmtpConnection conn, long handshakeDeadline) {
            this.conn = conn;
            this.handshakeDeadline = handshakeDeadline;
        }
    }

    private final String hostname;
    private final Supplier<SideChannelHandler> handler;
    private final ChannelLimits limits;
    private final ZmtpLimits zmtpLimits;
    private final Supplier<? extends Quiesce> quiesce;
    private final HealthMonitor health;
    private final long backlogBudget;
    private final AtomicLong backlogBytes = new AtomicLong();
    private final AtomicBoolean backlogPaused = new AtomicBoolean();
    private volatile LongConsumer backlogLoweredHook; // tests: forces an interleaving of the drain signal
    private final long pollMs;
    private final long handshakeNanos;
    private final long idleEvictNanos;
    private final int maxConnections;
    private final SelectorLoop loop;
    private final SenderLoop senderLoop;
    private final CompletableFuture<Integer> ready = new CompletableFuture<>();
    private final ConcurrentLinkedQueue<Reply> replies = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Map<String, Boolean> reportedErrors = new ConcurrentHashMap<>();

    // listener thread only
    private ServerSocketChannel server;
    private int port;
    private final Map<Key, Peer> byIdentity = new HashMap<>();
    private final List<Peer> peers = new ArrayList<>();
    private final ArrayDeque<Peer> handshaking = new ArrayDeque<>();
    private int nextIdentity;
    private boolean readingPaused;

    private final LongAdder received = new LongAdder();
    private final LongAdder malformed = new LongAdder();
    private final LongAdder handlerErrors = new LongAdder();
    private final LongAdder repliesSent = new LongAdder();
    private final LongAdder repliesDropped = new LongAdder();
    private final LongAdder listenerErrors = new LongAdder();
    private final LongAdder backlogPauses = new LongAdder();
    private final LongAdder backlogWakeUps = new LongAdder();
    private final LongAdder peersDropped = new LongAdder();
    private final LongAdder answersSent = new LongAdder();
    private final LongAdder answersDroppedProtocol = new LongAdder();
    private final LongAdder answersDroppedPeerGone = new LongAdder();
    private final LongAdder answersDroppedQueueFull = new LongAdder();
    private final LongAdder answersDroppedClosing = new LongAdder();
    private final LongAdder handshakes = new LongAdder();
    private volatile int connectionCount;

    public SenderListener(String hostname, Supplier<SideChannelHandler> handler, ChannelLimits limits,
            HealthMonitor health, Supplier<? extends Quiesce> quiesce, long pollMs) throws IOException {
        this(hostname, handler, limits, health, quiesce, pollMs, HANDSHAKE_MS, MAX_CONNECTIONS);
    }

    /** As above, with the handshake timeout and the connection cap (tests). */
    public SenderListener(String hostname, Supplier<SideChannelHandler> handler, ChannelLimits limits,
            HealthMonitor health, Supplier<? extends Quiesce> quiesce, long pollMs, long handshakeMs,
            int maxConnections) throws IOException {
        this(hostname, handler, limits, health, quiesce, pollMs, handshakeMs, maxConnections, IDLE_EVICT_MS);
    }

    /** As above, with how long a peer must be idle to give its slot up at the cap (tests). */
    public SenderListener(String hostname, Supplier<SideChannelHandler> handler, ChannelLimits limits,
            HealthMonitor health, Supplier<? extends Quiesce> quiesce, long pollMs, long handshakeMs,
            int maxConnections, long idleEvictMs) throws IOException {
        if (idleEvictMs < 0) {
            throw new IllegalArgumentException("idleEvictMs must not be negative: " + idleEvictMs);
        }
        this.idleEvictNanos = TimeUnit.MILLISECONDS.toNanos(idleEvictMs);
        if (pollMs <= 0 || handshakeMs <= 0 || maxConnections <= 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "pollMs, handshakeMs and maxConnections must be positive: %d, %d, %d", pollMs, handshakeMs,
                    maxConnections));
        }
        this.pollMs = pollMs;
        this.handshakeNanos = TimeUnit.MILLISECONDS.toNanos(handshakeMs);
        this.maxConnections = maxConnections;
        this.quiesce = Objects.requireNonNull(quiesce, "quiesce");
        this.hostname = Objects.requireNonNull(hostname, "hostname");
        this.handler = Objects.requireNonNull(handler, "handler");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.health = Objects.requireNonNull(health, "health");
        this.zmtpLimits = ZmtpLimits.of(Math.min(limits.maxMetadataBytes(), Integer.MAX_VALUE - 64L));
        this.backlogBudget = Math.max(4 * limits.maxMetadataBytes(), 1L << 20);
        this.loop = new SelectorLoop("mooncake-p-listener-0", new RouterLoop());
        this.senderLoop = new SenderLoop();
        this.loop.start();
    }

    public CompletableFuture<Integer> ready() {
        return ready;
    }

    public ScheduledExecutorService senderLoop() {
        return senderLoop.executor();
    }

    public ListenerStats stats() {
        // the answers before the messages: a snapshot taken while messages arrive never shows more
        // answers than messages
        ListenerStats.Answers answers = new ListenerStats.Answers(answersSent.sum(), answersDroppedProtocol.sum(),
                answersDroppedPeerGone.sum(), answersDroppedQueueFull.sum(), answersDroppedClosing.sum());
        return new ListenerStats(received.sum(), malformed.sum(), handlerErrors.sum(), repliesSent.sum(),
                repliesDropped.sum(), listenerErrors.sum(), backlogPauses.sum(), peersDropped.sum(), answers);
    }

    /** Peers whose READY was accepted, so far (tests and diagnostics). */
    public long handshakes() {
        return handshakes.sum();
    }

    /** Connections open now, handshaking ones included (tests and diagnostics). */
    public int connections() {
        return connectionCount;
    }

    public boolean alive() {
        return loop.alive();
    }

    public void injectFault(Error fault) {
        loop.injectFault(fault);
    }

    public long backlogWakeUps() {
        return backlogWakeUps.sum();
    }

    /**
     * Tests: {@code hook} runs on the sender loop after a handler task lowered the backlog (given the
     * backlog it left) and before it decides whether to wake the listener; null removes it.
     */
    public void backlogLoweredHook(LongConsumer hook) {
        backlogLoweredHook = hook;
    }

    private ServerSocketChannel bind(int port) throws IOException {
        ServerSocketChannel s = ServerSocketChannel.open();
        try {
            s.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            s.bind(new InetSocketAddress(hostname, port), 128);
            s.configureBlocking(false);
            return s;
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
    }

    /** The ROUTER's part of the shared selector loop (all on {@code mooncake-p-listener-0}). */
    private final class RouterLoop implements SelectorLoop.Owner {
        @Override
        public boolean start() {
            try {
                server = bind(0);
                port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            } catch (IOException | RuntimeException | Error e) {
                LOG.debug("Mooncake sender listener failed to start on {}", hostname, e);
                ready.completeExceptionally(e);
                closeQuietly(server);
                server = null;
                return false;
            }
            LOG.debug("Mooncake sender starting listening on path: tcp://{}:{} (builtin ZMTP)", hostname, port);
            ready.complete(port);
            return true;
        }

        @Override
        public void register(Selector selector) throws IOException {
            server.register(selector, SelectionKey.OP_ACCEPT);
        }

        @Override
        public long selectTimeoutMs() {
            return SenderListener.this.selectTimeoutMs();
        }

        @Override
        public void ready(SelectionKey k) {
            if (k.channel() == server) {
                try {
                    accept(server, k.selector());
                } catch (IOException e) {
                    error(e);
                }
            } else if (k.attachment() instanceof Peer p) {
                service(p, k);
            }
        }

        @Override
        public void afterSelect() {
            sendReplies();
            resumeIfDrained();
            expireHandshakes();
        }

        @Override
        public void error(Throwable e) {
            listenerErrors.increment();
            reportOnce("listener", e);
        }

        @Override
        public boolean recover(Throwable cause) {
            String what = loop.threadName() + " (side-channel ROUTER on " + hostname + ":" + port + ")";
            health.died(what, cause, true);
            // the peers' identities die with their connections: end their pulls first, and close the port
            // only once no write of theirs runs
            Quiesce.await(quiesce.get(), "the side-channel ROUTER is being recreated", QUIESCE_MS);
            closeAllPeers();
            closeQuietly(server);
            server = rebind(port);
            if (server == null) {
                return false;
            }
            health.recovered(loop.threadName());
            return true;
        }

        @Override
        public void stopped() {
            closeAllPeers();
            closeQuietly(server);
            Reply r;
            while ((r = replies.poll()) != null) {
                dropped(r.last, answersDroppedClosing);
                LOG.trace("dropping reply of {} bytes: listener stopped", r.payload.length);
            }
        }
    }

    private ServerSocketChannel rebind(int port) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REBIND_MS);
        IOException last = null;
        while (loop.running()) {
            try {
                return bind(port);
            } catch (IOException e) {
                last = e;
            }
            if (System.nanoTime() - deadline > 0) {
                health.recoveryFailed(loop.threadName() + " (side-channel ROUTER on " + hostname + ":" + port + ")",
                        last);
                return null;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // bounded retry while the port frees
        }
        return null;
    }

    private long selectTimeoutMs() {
        Peer head = handshaking.peekFirst();
        if (head == null) {
            return pollMs;
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(head.handshakeDeadline - System.nanoTime()) + 1;
        return Math.max(1, Math.min(pollMs, ms));
    }

    private void accept(ServerSocketChannel server, Selector selector) throws IOException {
        for (int i = 0; i < ACCEPT_BATCH; i++) {
            SocketChannel ch = server.accept();
            if (ch == null) {
                return;
            }
            if (peers.size() >= maxConnections && !evictIdle()) {
                peersDropped.increment();
                LOG.warn("side-channel connection from {} refused: {} connections are open (the cap)",
                        remote(ch), peers.size());
                closeQuietly(ch);
                continue;
            }
            try {
                ch.configureBlocking(false);
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException e) {
                closeQuietly(ch);
                continue;
            }
            Peer p = new Peer(new ZmtpConnection(ch, "ROUTER", null, zmtpLimits, new ZmtpConnection.Listener() {
                @Override
                public void onReady(ZmtpConnection c, String socketType, byte[] identity) throws ZmtpException {
                    peerReady((Peer) c.attachment(), identity);
                }

                @Override
                public boolean onMessage(ZmtpConnection c, List<byte[]> frames) {
                    return message((Peer) c.attachment(), frames);
                }
            }), System.nanoTime() + handshakeNanos);
            p.lastActive = System.nanoTime();
            p.conn.attach(p);
            peers.add(p);
            connectionCount = peers.size();
            handshaking.addLast(p);
            try {
                p.conn.flush(); // our greeting and READY
                p.key = ch.register(selector, p.conn.interestOps(reads(p)), p);
            } catch (IOException e) {
                drop(p, "the connection failed at once: " + e, false);
            }
        }
    }

    /**
     * At the cap: drops the handshaken peer idle the longest if it has been idle for at least
     * {@link #IDLE_EVICT_MS} and is owed no answer; true when a slot was freed.
     */
    private boolean evictIdle() {
        long now = System.nanoTime();
        Peer victim = null;
        for (Peer q : peers) {
            if (!q.closed && q.identity != null && !q.owed && now - q.lastActive >= idleEvictNanos
                    && (victim == null || q.lastActive - victim.lastActive < 0)) {
                victim = q;
            }
        }
        if (victim == null) {
            return false;
        }
        drop(victim, String.format(Locale.ROOT, "idle for %d ms and owed nothing while %d connections (the cap) "
                + "were open: its slot goes to a new connection", TimeUnit.NANOSECONDS.toMillis(now - victim.lastActive),
                peers.size()), false);
        return true;
    }

    private void peerReady(Peer p, byte[] identity) throws ZmtpException {
        byte[] id = identity;
        if (id.length > 0) {
            if (byIdentity.containsKey(new Key(id))) {
                throw new ZmtpException("the peer's identity " + printable(id) + " is in use by another connection");
            }
        } else {
            do {
                int n = nextIdentity++;
                id = new byte[] {0, (byte) (n >>> 24), (byte) (n >>> 16), (byte) (n >>> 8), (byte) n};
            } while (byIdentity.containsKey(new Key(id)));
        }
        p.identity = id;
        byIdentity.put(new Key(id), p);
        handshakes.increment();
    }

    private static String printable(byte[] id) {
        StringBuilder b = new StringBuilder();
        for (byte x : id) {
            b.append(x >= 0x20 && x < 0x7F ? Character.toString(x) : String.format(Locale.ROOT, "\\x%02x", x & 0xFF));
        }
        return '"' + b.toString() + '"';
    }

    private void service(Peer p, SelectionKey k) {
        try {
            if (k.isWritable()) {
                p.conn.flush();
            }
            if (k.isReadable() && reads(p)) {
                int n = p.conn.read(loop.readBuffer());
                if (n < 0) {
                    drop(p, null, false);
                    return;
                }
                if (n > 0) {
                    p.lastActive = System.nanoTime();
                }
            }
            if (!p.closed) {
                updateInterest(p);
            }
        } catch (ZmtpException e) {
            drop(p, e.getMessage(), true);
        } catch (IOException e) {
            drop(p, null, false); // reset by the peer and the like: a disconnect
        }
    }

    private void updateInterest(Peer p) {
        if (p.key != null && p.key.isValid()) {
            p.key.interestOps(p.conn.interestOps(reads(p)));
        }
    }

    /**
     * Whether the listener reads from {@code p} now: always during its handshake (not a message, and a
     * pause must not run a new peer into its handshake timeout), else unless paused on the backlog.
     */
    private boolean reads(Peer p) {
        return !readingPaused || p.identity == null;
    }

    /** Closes a peer's connection; {@code reason} non-null when it is dropped by us (counted, logged). */
    private void drop(Peer p, String reason, boolean protocol) {
        if (p.closed) {
            return;
        }
        p.closed = true;
        if (protocol) {
            p.gone = Gone.PROTOCOL;
        }
        if (reason != null) {
            peersDropped.increment();
            if (protocol) {
                LOG.warn("side-channel peer {} dropped: {}", remote(p.conn.channel()), reason);
            } else {
                LOG.info("side-channel peer {} dropped: {}", remote(p.conn.channel()), reason);
            }
        }
        if (p.identity != null) {
            byIdentity.remove(new Key(p.identity), p);
        }
        p.conn.close();
        peers.remove(p);
        connectionCount = peers.size();
    }

    private static String remote(SocketChannel ch) {
        try {
            return String.valueOf(ch.getRemoteAddress());
        } catch (IOException e) {
            return "?";
        }
    }

    private void expireHandshakes() {
        long now = System.nanoTime();
        Peer p;
        while ((p = handshaking.peekFirst()) != null) {
            if (p.closed || p.identity != null) {
                handshaking.pollFirst();
            } else if (now - p.handshakeDeadline > 0) {
                handshaking.pollFirst();
                drop(p, String.format(Locale.ROOT, "no ZMTP handshake within %d ms",
                        TimeUnit.NANOSECONDS.toMillis(handshakeNanos)), false);
            } else {
                return;
            }
        }
    }

    /** Hands a message to the sender loop; false when the backlog made the listener stop reading. */
    private boolean message(Peer p, List<byte[]> frames) {
        received.increment();
        p.owed = true;
        WaveTrace.mark(WaveTrace.Point.P_RECEIVED);
        if (frames.size() != 1) {
            malformed.increment();
            if (LOG.isDebugEnabled()) {
                LOG.debug("Malformed side-channel message: {} frame(s) after the identity, expected 1", frames.size());
            }
        }
        dispatch(p, List.copyOf(frames));
        if (backlogBytes.get() > backlogBudget && !readingPaused && pauseOnBacklog()) {
            backlogPauses.increment();
            readingPaused = true; // the sender loop is behind: no OP_READ until it catches up (TCP pushes back)
            for (Peer q : peers) {
                updateInterest(q);
            }
        }
        return !readingPaused;
    }

    /** Flags the pause, then checks the backlog again (a handler that lowered it in between is not missed). */
    private boolean pauseOnBacklog() {
        backlogPaused.set(true);
        return backlogBytes.get() > backlogBudget;
    }

    /**
     * While paused, re-arms the drain signal before each check. A handler's signal is decided on the
     * backlog it computed before it looks at {@code backlogPaused}; one that computed a backlog under the
     * budget, was then descheduled while the listener read on and paused again, and then found the flag
     * armed by that new pause, takes the flag and wakes the listener while the backlog is still over the
     * budget. Without the re-arm the flag would then stay clear, the handler that really drains the backlog
     * would see nothing to wake, and the listener would sleep until its poll bound. Each handler that takes
     * the flag wakes the loop, so a pass of this method follows every take, and re-arming here before the
     * re-check (the same order as {@link #pauseOnBacklog}) leaves no take unanswered.
     */
    private void resumeIfDrained() {
        if (readingPaused) {
            backlogPaused.set(true);
        }
        if (readingPaused && backlogBytes.get() <= backlogBudget) {
            readingPaused = false;
            for (Peer q : List.copyOf(peers)) {
                if (q.conn.hasPending() && !q.closed && !readingPaused) {
                    // bytes read before the pause: no readiness event brings them back
                    readPending(q);
                }
                if (!q.closed) {
                    updateInterest(q);
                }
            }
        }
    }

    private void readPending(Peer p) {
        try {
            p.conn.read(loop.readBuffer());
        } catch (ZmtpException e) {
            drop(p, e.getMessage(), true);
        } catch (IOException e) {
            drop(p, null, false);
        }
    }

    private void backlogLowered(long now) {
        if (now <= backlogBudget && backlogPaused.get() && backlogPaused.compareAndSet(true, false)) {
            backlogWakeUps.increment();
            loop.wake();
        }
    }

    private void dispatch(Peer origin, List<byte[]> frames) {
        byte[] identity = origin.identity;
        ReplySink sink = new ReplySink() {
            @Override
            public boolean send(byte[] payload) {
                return reply(origin, payload, true);
            }

            @Override
            public boolean sendContinue(byte[] payload) {
                return reply(origin, payload, false);
            }
        };
        long bytes = identity.length;
        for (byte[] f : frames) {
            bytes += f.length;
        }
        long held = bytes;
        backlogBytes.addAndGet(held);
        try {
            senderLoop.executor().execute(() -> {
                try {
                    handler.get().onMessage(identity, frames, sink);
                } catch (Exception | Error e) {
                    handlerErrors.increment();
                    reportOnce("handler", e);
                } finally {
                    long now = backlogBytes.addAndGet(-held);
                    LongConsumer hook = backlogLoweredHook;
                    if (hook != null) {
                        hook.accept(now);
                    }
                    backlogLowered(now);
                }
            });
        } catch (RejectedExecutionException e) {
            backlogBytes.addAndGet(-held);
            answersDroppedClosing.increment(); // never handled: no answer will come
            LOG.debug("sender loop stopped; dropping a side-channel message");
        }
    }

    private boolean reply(Peer origin, byte[] payload, boolean last) {
        Objects.requireNonNull(payload, "payload");
        if (!loop.running()) {
            dropped(last, answersDroppedClosing);
            return false;
        }
        replies.add(new Reply(origin, payload, last));
        loop.wake();
        return true;
    }

    private void sendReplies() {
        Reply r;
        while ((r = replies.poll()) != null) {
            WaveTrace.mark(WaveTrace.Point.P_REPLY_SENT);
            // its own connection, else the one that took its identity over (a peer that reconnected)
            Peer p = r.origin.closed ? byIdentity.get(new Key(r.origin.identity)) : r.origin;
            if (p == null || p.closed) {
                dropped(r.last, switch (r.origin.gone) {
                    case PROTOCOL -> answersDroppedProtocol;
                    case CLOSING -> answersDroppedClosing;
                    case PEER -> answersDroppedPeerGone;
                });
                LOG.trace("side-channel reply of {} bytes dropped: its peer is gone", r.payload.length);
                continue;
            }
            if (!p.conn.send(r.payload)) {
                dropped(r.last, answersDroppedQueueFull);
                LOG.trace("side-channel reply of {} bytes dropped: the peer's out-queue is full", r.payload.length);
                continue;
            }
            repliesSent.increment();
            if (r.last) {
                answersSent.increment();
            }
            p.owed = false;
            p.lastActive = System.nanoTime();
            try {
                p.conn.flush();
                updateInterest(p);
            } catch (IOException e) {
                drop(p, null, false);
            }
        }
    }

    /** A reply was dropped; a final answer also counts under {@code reason}. */
    private void dropped(boolean last, LongAdder reason) {
        repliesDropped.increment();
        if (last) {
            reason.increment();
        }
    }

    private void closeAllPeers() {
        for (Peer p : List.copyOf(peers)) {
            p.gone = Gone.CLOSING; // the listener stops or is recreated: not the peer's doing
            drop(p, null, false);
        }
        handshaking.clear();
        byIdentity.clear();
    }

    private static void closeQuietly(java.nio.channels.Channel c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (IOException e) {
            LOG.debug("closing a side-channel socket", e);
        }
    }

    private void reportOnce(String where, Throwable e) {
        String key = where + ':' + e.getClass().getName() + ':' + e.getMessage();
        if (reportedErrors.size() < MAX_DISTINCT_ERRORS && reportedErrors.putIfAbsent(key, Boolean.TRUE) == null) {
            LOG.error("Error in Mooncake sender {} (further occurrences are counted, not logged): {}", where,
                    e.toString(), e);
        } else {
            LOG.debug("Error in Mooncake sender {} (repeated): {}", where, e.toString());
        }
    }

    /** Stops both threads, closes the connections and the listening channel (on the listener thread). */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        boolean listenerStopped = loop.stop(JOIN_MS);
        senderLoop.stop(JOIN_MS);
        if (!listenerStopped) {
            LOG.error("{} did not stop within {} ms", loop.threadName(), JOIN_MS);
        }
    }
}
