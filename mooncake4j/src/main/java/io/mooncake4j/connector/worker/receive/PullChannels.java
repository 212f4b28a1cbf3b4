package io.mooncake4j.connector.worker.receive;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.loop.SelectorLoop;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.internal.zmtp.ZmtpConnection;
import io.mooncake4j.internal.zmtp.ZmtpException;
import io.mooncake4j.internal.zmtp.ZmtpLimits;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * D's side-channel pulls (vLLM's {@code receive_kv_from_single_worker} socket work, spec §2.5, §6.13) on
 * our own ZMTP 3.1 ({@code io.mooncake4j.internal.zmtp}): DEALER connections served by
 * {@code mooncake-d-io-0} itself, one {@link Selector}, no I/O thread in between (each hand-off would cost a thread wake-up), so the thread
 * count does not grow with the number of concurrent pulls.
 *
 * <p>Per pull: a connection to the P worker (an idle one of an earlier pull to the same address, or a
 * fresh non-blocking connect). A fresh connection sends our greeting and READY ({@code Socket-Type
 * DEALER}) at once and the pull's request frame only once P's READY was read and validated: a handshake
 * that fails or times out (after the handshake timeout times the attempt number) is retried on a fresh
 * connection, which is safe because the request cannot have reached P; a refused connect is retried
 * every {@link #RECONNECT_MS} (as a ZMQ DEALER reconnects) until the receive deadline. Responses are
 * decoded here ({@link MooncakeXferResponseCodec}, frames of at most
 * {@link ChannelLimits#maxResponseBytes()}) and handed to the pull's listener until a
 * {@code FINISH}/{@code ERROR}, a decode error, or the receive deadline (re-armed by each response);
 * after the last answer the connection is kept for the next pull to that address (at most
 * {@link #MAX_IDLE_PER_PEER}); an idle connection that reaches EOF or receives anything is
 * dropped ({@code addressLost} reported for EOF).
 *
 * <p><b>A disconnect after the request went out</b> sends the request again on a new connection (at most
 * {@link #MAX_RESENDS} times, within the pull's own receive deadline): D sends no ZMQ identity, so P
 * cannot route the answer to the new connection, but it answers the re-sent request from what it knows
 * (never writing it twice), and answers heard already are not passed on again. A refused connect then
 * (P's worker gone: it writes nothing) fails the pull at once. Past the re-sends, or after a ZMTP
 * violation by P (such as an oversized frame), the "no write after abandonment" rule holds: the loop
 * probes P's port with a plain TCP connect (every {@link #PROBE_INTERVAL_MS}): refused fails the pull
 * at once; accepted lets it fail at its receive deadline, by which time P's staleness rule guarantees
 * that no write of it starts. {@code addressLost} is reported.
 *
 * <p><b>Bounds and watchdog.</b> Open connections (pull, idle and probe) are capped
 * ({@link #MAX_CONNECTIONS}); at the cap an idle connection is closed to make room, and without one the
 * pull fails and the {@link HealthMonitor} hears of the exhaustion. An {@link Error} escaping the loop fails
 * the pulls in flight, closes every connection, is reported to the {@link HealthMonitor}, and the loop goes on.
 */
public final class PullChannels implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(PullChannels.class);

    /** What a pull's owner hears; called on the I/O thread, must not block. */
    interface Listener {
        /** A decoded response; the last one is FINISH or ERROR. */
        void onResponse(MooncakeXferResponse response);

        /** The pull ended without a FINISH/ERROR: timeout, disconnect, undecodable answer, shutdown. */
        void onFailure(String reason);
    }

    /** Idle connections kept per P worker. */
    static final int MAX_IDLE_PER_PEER = 8;

    /** A connect refused before the request went out is tried again after this long. */
    static final long RECONNECT_MS = 100;
    /** After a disconnect past the request, P's port is probed this often until the pull ends. */
    static final long PROBE_INTERVAL_MS = 1_000;
    /** A probe that neither connects nor is refused within this long counts as "P may be alive". */
    static final long PROBE_TIMEOUT_MS = 2_000;
    /** Connections open at once by default (pulls, idle ones, probes). */
    static final int MAX_CONNECTIONS = 1024;
    /** A request goes out again at most this often when connections are lost before its answer. */
    static final int MAX_RESENDS = 2;
    private static final long MAX_POLL_MS = 1_000;
    private static final long JOIN_MS = 5_000;

    /** One TCP connection: a ZMTP DEALER connection, or a probe (no ZMTP). */
    final class Conn {
        final String address;
        final SocketChannel channel;
        final ZmtpConnection zmtp; // null for a probe
        SelectionKey key;
        PendingPull pull; // the pull it serves; null when idle (or a probe)
        PendingPull probeOf; // a probe: the pull it asks about
        long probeDeadline;
        boolean connected;
        boolean closed;

        Conn(String address, SocketChannel channel, boolean probe) {
            this.address = address;
            this.channel = channel;
            this.zmtp = probe ? null : new ZmtpConnection(channel, "DEALER", null, zmtpLimits, dealerListener);
            if (zmtp != null) {
                zmtp.attach(this);
            }
        }
    }

    private final long receiveTimeoutNanos;
    private final long handshakeTimeoutNanos;
    private final BackgroundErrors errors;
    private final HealthMonitor health;
    private final Consumer<String> addressLost;
    private final ZmtpLimits zmtpLimits;
    private final int maxConnections;
    private final ZmtpConnection.Listener dealerListener;
    private final SelectorLoop loop;
    private final ConcurrentLinkedQueue<PendingPull> submitted = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean closed = new AtomicBoolean();

    // I/O thread only
    private final List<PendingPull> active = new ArrayList<>();
    private final Map<String, ArrayDeque<Conn>> idle = new HashMap<>();
    private int openConnections;
    private Selector selector;

    private final LongAdder handshakeRetries = new LongAdder();
    private final LongAdder handshakeReconnects = new LongAdder();
    private final LongAdder pullsStarted = new LongAdder();
    private final LongAdder pullsResent = new LongAdder();
    private final LongAdder connectionsOpened = new LongAdder();
    private volatile int activeCount;

    /**
     * @param maxConnections the connection cap; 0 for {@link #MAX_CONNECTIONS}
     */
    PullChannels(long receiveTimeoutNanos, long handshakeTimeoutNanos, BackgroundErrors errors,
            ChannelLimits limits, HealthMonitor health, Consumer<String> addressLost, int maxConnections)
            throws IOException {
        this.receiveTimeoutNanos = receiveTimeoutNanos;
        this.handshakeTimeoutNanos = Math.max(1, handshakeTimeoutNanos);
        this.errors = Objects.requireNonNull(errors, "errors");
        this.health = Objects.requireNonNull(health, "health");
        this.addressLost = Objects.requireNonNull(addressLost, "addressLost");
        this.zmtpLimits = ZmtpLimits.of(Math.min(limits.maxResponseBytes(), Integer.MAX_VALUE - 64L));
        this.maxConnections = maxConnections > 0 ? maxConnections : MAX_CONNECTIONS;
        this.dealerListener = new ZmtpConnection.Listener() {
            @Override
            public void onReady(ZmtpConnection c, String socketType, byte[] identity) {
                peerReady((Conn) c.attachment());
            }

            @Override
            public boolean onMessage(ZmtpConnection c, List<byte[]> frames) {
                return response((Conn) c.attachment(), frames);
            }
        };
        this.loop = new SelectorLoop("mooncake-d-io-0", new DealerLoop());
        loop.start();
    }

    void submit(String address, byte[] payload, Listener listener) {
        if (!loop.running()) {
            listener.onFailure("the Mooncake receiver is closed");
            return;
        }
        submitted.add(new PendingPull(address, payload, listener));
        loop.wake();
        if (!loop.running() && submitted.remove(findSubmitted(listener))) {
            listener.onFailure("the Mooncake receiver is closed");
        }
    }

    private PendingPull findSubmitted(Listener l) {
        for (PendingPull p : submitted) {
            if (p.listener == l) {
                return p;
            }
        }
        return null;
    }

    public long handshakeRetries() {
        return handshakeRetries.sum();
    }

    public long handshakeReconnects() {
        return handshakeReconnects.sum();
    }

    long pullsStarted() {
        return pullsStarted.sum();
    }

    /** Requests sent again on a new connection after the one they went out on was lost. */
    public long pullsResent() {
        return pullsResent.sum();
    }

    public long connectionsOpened() {
        return connectionsOpened.sum();
    }

    public int activePulls() {
        return activeCount;
    }

    public boolean alive() {
        return loop.alive();
    }

    public void injectFault(Error fault) {
        loop.injectFault(fault);
    }

    /** The DEALERs' part of the shared selector loop (all on {@code mooncake-d-io-0}). */
    private final class DealerLoop implements SelectorLoop.Owner {
        @Override
        public boolean start() {
            return true;
        }

        @Override
        public void register(Selector sel) {
            selector = sel;
        }

        @Override
        public long selectTimeoutMs() {
            return pollMs(System.nanoTime());
        }

        @Override
        public void ready(SelectionKey k) {
            if (k.attachment() instanceof Conn c) {
                PullChannels.this.ready(c, k);
            }
        }

        @Override
        public void afterSelect() {
            PendingPull p;
            while ((p = submitted.poll()) != null) {
                PullChannels.this.start(p);
            }
            long now = System.nanoTime();
            for (int i = active.size() - 1; i >= 0; i--) {
                PendingPull pull = active.get(i);
                if (pull.done || !deadlines(pull, now)) {
                    active.remove(i);
                }
            }
            activeCount = active.size();
        }

        @Override
        public void error(Throwable e) {
            errors.report("pull I/O", e);
        }

        @Override
        public boolean recover(Throwable cause) {
            health.died(loop.threadName() + " (D side-channel I/O)", cause, true);
            abandonAll("the Mooncake pull I/O thread failed: " + cause);
            health.recovered(loop.threadName());
            return true;
        }

        @Override
        public void stopped() {
            abandonAll("the Mooncake receiver is closed");
            PendingPull p;
            while ((p = submitted.poll()) != null) {
                p.listener.onFailure("the Mooncake receiver is closed");
            }
            activeCount = 0;
        }
    }

    /** Fails every pull in flight and closes every connection. */
    private void abandonAll(String reason) {
        for (PendingPull pull : List.copyOf(active)) {
            end(pull);
            pull.listener.onFailure(reason);
        }
        active.clear();
        for (ArrayDeque<Conn> q : idle.values()) {
            for (Conn c : q) {
                closeConn(c);
            }
        }
        idle.clear();
        activeCount = 0;
    }

    /** How long the selector may wait: until the next deadline of a pull, at most {@link #MAX_POLL_MS}. */
    private long pollMs(long now) {
        long next = now + TimeUnit.MILLISECONDS.toNanos(MAX_POLL_MS);
        for (PendingPull p : active) {
            next = earlier(next, p.receiveDeadline);
            if (!p.sent && p.reconnectAt == 0) {
                next = earlier(next, p.handshakeDeadline);
            }
            if (p.reconnectAt != 0) {
                next = earlier(next, p.reconnectAt);
            }
            if (p.lost) {
                next = earlier(next, p.probe != null ? p.probe.probeDeadline : p.nextProbeAt);
            }
        }
        return Math.max(1, TimeUnit.NANOSECONDS.toMillis(next - now) + 1);
    }

    private static long earlier(long a, long b) {
        return b - a < 0 ? b : a;
    }

    private void start(PendingPull pull) {
        pullsStarted.increment();
        active.add(pull);
        pull.receiveDeadline = System.nanoTime() + receiveTimeoutNanos;
        ArrayDeque<Conn> pool = idle.get(pull.address);
        Conn reuse;
        while (pool != null && (reuse = pool.pollLast()) != null) {
            if (!stillOpen(reuse)) {
                continue; // its EOF predates this pull: not evidence about this pull
            }
            reuse.pull = pull;
            pull.conn = reuse;
            pull.attempts = 1;
            sendRequest(pull);
            return;
        }
        open(pull);
    }

    /** Reads what an idle connection has: false (closed, addressLost reported) when it ended or sent something. */
    private boolean stillOpen(Conn c) {
        try {
            int n = c.zmtp.read(loop.readBuffer());
            if (n >= 0 && !c.closed && !c.zmtp.hasPending()) {
                return true;
            }
            if (n < 0) {
                addressLost.accept(c.address);
            }
        } catch (IOException e) {
            addressLost.accept(c.address);
        }
        closeConn(c);
        return false;
    }

    /** Makes room for one more connection; false (reported) when every slot serves a pull. */
    private boolean slotFree() {
        if (openConnections < maxConnections) {
            return true;
        }
        for (Iterator<ArrayDeque<Conn>> qi = idle.values().iterator(); qi.hasNext(); ) {
            ArrayDeque<Conn> q = qi.next();
            Conn c = q.pollFirst();
            if (q.isEmpty()) {
                qi.remove();
            }
            if (c != null) {
                closeConn(c);
                return true;
            }
        }
        health.exhausted(loop.threadName() + " (D side-channel connections)", String.format(Locale.ROOT,
                "no free connection slot (at most %d connections; %d pulls in flight): too many pulls run at once; "
                        + "pulls fail until slots free up", maxConnections, active.size()),
                new IllegalStateException("side-channel connection cap reached"));
        return false;
    }

    private SocketChannel connect(String address, Conn[] made, boolean probe) throws IOException {
        InetSocketAddress to = PendingPull.socketAddress(address);
        SocketChannel ch = SocketChannel.open();
        try {
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            Conn c = new Conn(address, ch, probe);
            openConnections++;
            made[0] = c;
            c.connected = ch.connect(to);
            c.key = ch.register(selector, c.connected ? interest(c) : SelectionKey.OP_CONNECT, c);
            if (c.connected && c.zmtp != null) {
                c.zmtp.flush();
                c.key.interestOps(interest(c));
            }
            return ch;
        } catch (IOException | RuntimeException e) {
            if (made[0] != null) {
                closeConn(made[0]);
            } else {
                ch.close();
            }
            throw e;
        }
    }

    private static int interest(Conn c) {
        return c.zmtp == null ? SelectionKey.OP_CONNECT : c.zmtp.interestOps(true);
    }

    /** A fresh connection for a pull whose request has not gone out. */
    private void open(PendingPull pull) {
        pull.reconnectAt = 0;
        if (!slotFree()) {
            fail(pull, "cannot connect to " + pull.address + ": too many side-channel connections (at most "
                    + maxConnections + ")");
            return;
        }
        connectionsOpened.increment();
        pull.attempts++;
        pull.handshakeDeadline = System.nanoTime() + handshakeTimeoutNanos * pull.attempts;
        Conn[] made = new Conn[1];
        try {
            connect(pull.address, made, false);
            made[0].pull = pull;
            pull.conn = made[0];
        } catch (ConnectException e) {
            refused(pull);
        } catch (IOException | RuntimeException e) {
            fail(pull, "cannot connect to " + pull.address + ": " + e);
        }
    }

    /** P's port refused a connect: retried, as a DEALER does, unless the request may have reached P. */
    private void refused(PendingPull pull) {
        if (pull.resends == 0) {
            retryLater(pull);
        } else { // the request went out before: P's worker is gone and writes nothing
            fail(pull, "P worker " + pull.address + " disconnected before answering and no longer accepts connections");
        }
    }

    private void retryLater(PendingPull pull) {
        if (pull.conn != null) {
            pull.conn.pull = null;
            closeConn(pull.conn);
            pull.conn = null;
        }
        pull.reconnectAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RECONNECT_MS);
    }

    private void ready(Conn c, SelectionKey k) {
        if (c.closed) {
            return;
        }
        if (k.isConnectable()) {
            try {
                c.channel.finishConnect();
                c.connected = true;
            } catch (IOException e) {
                connectFailed(c, e);
                return;
            }
            if (c.zmtp == null) {
                probeAnswered(c, true);
                return;
            }
        }
        try {
            if (c.connected && (k.isWritable() || k.isConnectable())) {
                c.zmtp.flush();
            }
            if (k.isReadable()) {
                if (c.zmtp.read(loop.readBuffer()) < 0) {
                    lost(c, null);
                    return;
                }
                if (!c.closed && c.pull == null && c.zmtp.hasPending()) {
                    LOG.warn("unexpected message on an idle side-channel connection to {}; closing it", c.address);
                    closeConn(c);
                    removeIdle(c);
                    return;
                }
                if (c.closed) {
                    removeIdle(c);
                    return;
                }
            }
            if (!c.closed && c.key.isValid()) {
                c.key.interestOps(interest(c));
            }
        } catch (ZmtpException e) {
            lost(c, e.getMessage());
        } catch (IOException e) {
            lost(c, null);
        }
    }

    private void connectFailed(Conn c, IOException e) {
        if (c.zmtp == null) {
            probeAnswered(c, !(e instanceof ConnectException));
            return;
        }
        PendingPull pull = c.pull;
        closeConn(c);
        if (pull != null && !pull.done) {
            pull.conn = null;
            if (e instanceof ConnectException) {
                refused(pull);
            } else {
                fail(pull, "cannot connect to " + pull.address + ": " + e);
            }
        }
    }

    /** P's READY was accepted: the request goes out now (it could not have reached P before). */
    private void peerReady(Conn c) {
        PendingPull pull = c.pull;
        if (pull != null && !pull.sent) {
            sendRequest(pull);
        }
    }

    private void sendRequest(PendingPull pull) {
        Conn c = pull.conn;
        WaveTrace.mark(WaveTrace.Point.D_PULL_SENT);
        if (!c.zmtp.send(pull.payload)) {
            // an out-queue that is full while P reads nothing: this connection is useless
            c.pull = null;
            closeConn(c);
            pull.conn = null;
            open(pull);
            return;
        }
        pull.sent = true;
        try {
            c.zmtp.flush();
            if (c.key.isValid()) {
                c.key.interestOps(interest(c));
            }
        } catch (IOException e) {
            lost(c, null);
        }
    }

    /** A message from P on {@code c}: false to stop decoding (the pull ended, or it was unexpected). */
    private boolean response(Conn c, List<byte[]> frames) {
        PendingPull pull = c.pull;
        if (pull == null) {
            LOG.warn("unexpected message on an idle side-channel connection to {}; closing it", c.address);
            closeConn(c);
            removeIdle(c);
            return false;
        }
        WaveTrace.mark(WaveTrace.Point.D_RESPONSE_READ);
        pull.receiveDeadline = System.nanoTime() + receiveTimeoutNanos;
        MooncakeXferResponse resp;
        try {
            if (frames.size() != 1) {
                throw new IllegalArgumentException("P worker " + pull.address + " answered with a message of "
                        + frames.size() + " frames, expected 1");
            }
            resp = pull.unseen(MooncakeXferResponseCodec.decode(frames.getFirst()));
        } catch (RuntimeException e) {
            end(pull);
            pull.listener.onFailure(e.toString());
            return false;
        }
        boolean last = resp.status() != MooncakeXferResponseStatus.CONTINUE;
        if (last) {
            release(pull);
        }
        pull.listener.onResponse(resp);
        return !last;
    }

    /**
     * After a FINISH/ERROR nothing more comes for that request, so the connection is kept for the next pull
     * to the same P worker; vLLM opens a fresh DEALER per pull, which the P side cannot tell apart.
     */
    private void release(PendingPull pull) {
        pull.done = true;
        Conn c = pull.conn;
        pull.conn = null;
        closeProbe(pull);
        if (c == null) {
            return;
        }
        c.pull = null;
        ArrayDeque<Conn> pool = idle.computeIfAbsent(pull.address, a -> new ArrayDeque<>());
        if (loop.running() && pool.size() < MAX_IDLE_PER_PEER) {
            pool.addLast(c);
        } else {
            closeConn(c);
        }
    }

    /** The connection ended (EOF, reset) or P broke ZMTP ({@code protocolError} non-null). */
    private void lost(Conn c, String protocolError) {
        PendingPull pull = c.pull;
        closeConn(c);
        if (pull == null) {
            removeIdle(c);
            addressLost.accept(c.address);
            if (protocolError != null) {
                LOG.warn("idle side-channel connection to {} dropped: {}", c.address, protocolError);
            }
            return;
        }
        pull.conn = null;
        if (!pull.sent) {
            handshakeReconnects.increment();
            LOG.debug("side-channel connection to {} lost before its handshake ({}); connecting again", pull.address,
                    protocolError != null ? protocolError : "closed by P");
            retryLater(pull);
            return;
        }
        if (protocolError == null && pull.resends < MAX_RESENDS) {
            // P may be alive and only the answer lost: P answers a re-sent request from what it knows
            pull.resends++;
            pullsResent.increment();
            pull.sent = false;
            addressLost.accept(pull.address);
            LOG.info("side-channel connection to {} lost after the request went out; sending it again on a new "
                    + "connection ({} of {})", pull.address, pull.resends, MAX_RESENDS);
            open(pull);
            return;
        }
        pull.lost = true;
        pull.lostReason = protocolError;
        pull.nextProbeAt = System.nanoTime();
        addressLost.accept(pull.address);
        if (protocolError != null) {
            LOG.warn("P worker {} broke the ZMTP protocol: {}", pull.address, protocolError);
        }
    }

    private void removeIdle(Conn c) {
        ArrayDeque<Conn> q = idle.get(c.address);
        if (q != null) {
            q.remove(c);
            if (q.isEmpty()) {
                idle.remove(c.address);
            }
        }
    }

    private void probeAnswered(Conn probe, boolean alive) {
        PendingPull pull = probe.probeOf;
        closeConn(probe);
        if (pull == null || pull.done) {
            return;
        }
        pull.probe = null;
        if (alive) {
            pull.nextProbeAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PROBE_INTERVAL_MS);
            if (!pull.aliveLogged) {
                pull.aliveLogged = true;
                LOG.warn("side-channel connection to {} was lost after the request went out{}: P still accepts "
                        + "connections, so its answer to this pull is lost; the pull fails at its receive deadline "
                        + "(P starts no write after it)", pull.address,
                        pull.lostReason != null ? " (" + pull.lostReason + ")" : "");
            }
        } else {
            end(pull);
            pull.listener.onFailure("P worker " + pull.address + " disconnected before answering"
                    + (pull.lostReason != null ? " (" + pull.lostReason + ")" : "")
                    + " and no longer accepts connections");
        }
    }

    /** Checks a pull's deadlines and timers; false when it is over. */
    private boolean deadlines(PendingPull pull, long now) {
        if (now - pull.receiveDeadline > 0) {
            end(pull);
            pull.listener.onFailure(String.format(Locale.ROOT, "no answer from %s within %d ms (receive timeout)",
                    pull.address, TimeUnit.NANOSECONDS.toMillis(receiveTimeoutNanos)));
            return false;
        }
        if (pull.lost) {
            if (pull.probe != null && now - pull.probe.probeDeadline > 0) {
                probeAnswered(pull.probe, true); // unsure: P may be alive, so wait for the deadline
            }
            if (pull.probe == null && !pull.done && now - pull.nextProbeAt >= 0) {
                startProbe(pull, now);
            }
            return !pull.done;
        }
        if (pull.reconnectAt != 0) {
            if (now - pull.reconnectAt >= 0) {
                open(pull);
            }
            return !pull.done;
        }
        if (!pull.sent && pull.conn != null && now - pull.handshakeDeadline > 0) {
            handshakeRetries.increment();
            LOG.info("side-channel connection to {} made no ZMTP handshake within {} ms (attempt {}); retrying on a "
                    + "fresh connection", pull.address,
                    TimeUnit.NANOSECONDS.toMillis(handshakeTimeoutNanos * pull.attempts), pull.attempts);
            Conn c = pull.conn;
            c.pull = null;
            closeConn(c);
            pull.conn = null;
            open(pull);
        }
        return !pull.done;
    }

    private void startProbe(PendingPull pull, long now) {
        Conn[] made = new Conn[1];
        try {
            connect(pull.address, made, true);
            Conn p = made[0];
            p.probeOf = pull;
            p.probeDeadline = now + TimeUnit.MILLISECONDS.toNanos(PROBE_TIMEOUT_MS);
            pull.probe = p;
            if (p.connected) {
                probeAnswered(p, true);
            }
        } catch (ConnectException e) {
            pull.probe = null;
            end(pull);
            pull.listener.onFailure("P worker " + pull.address + " disconnected before answering"
                    + (pull.lostReason != null ? " (" + pull.lostReason + ")" : "")
                    + " and no longer accepts connections");
        } catch (IOException | RuntimeException e) {
            pull.nextProbeAt = now + TimeUnit.MILLISECONDS.toNanos(PROBE_INTERVAL_MS); // unsure: try again
        }
    }

    private void fail(PendingPull pull, String reason) {
        end(pull);
        pull.listener.onFailure(reason);
    }

    /** Marks a pull over and closes its connection and probe. */
    private void end(PendingPull pull) {
        pull.done = true;
        if (pull.conn != null) {
            pull.conn.pull = null;
            closeConn(pull.conn);
            pull.conn = null;
        }
        closeProbe(pull);
    }

    private void closeProbe(PendingPull pull) {
        if (pull.probe != null) {
            pull.probe.probeOf = null;
            closeConn(pull.probe);
            pull.probe = null;
        }
    }

    private void closeConn(Conn c) {
        if (c.closed) {
            return;
        }
        c.closed = true;
        openConnections--;
        if (c.zmtp != null) {
            c.zmtp.close();
        } else {
            try {
                c.channel.close();
            } catch (IOException e) {
                LOG.debug("closing a probe", e);
            }
        }
    }

    /** Open connections now, pulls', idle and probes (I/O thread; tests read it after the loop settled). */
    int openConnections() {
        return openConnections;
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        if (!loop.stop(JOIN_MS)) {
            LOG.error("{} did not stop within {} ms", loop.threadName(), JOIN_MS);
        }
    }
}
