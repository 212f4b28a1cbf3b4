package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZEvent;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;
import org.zeromq.ZMonitor;
import zmq.ZError;
import zmq.msg.MsgAllocator;

/**
 * The decode side's DEALER sockets on JeroMQ ({@code side_channel_zmq: jeromq}; the default is
 * {@link ZmtpPullChannels}) (vLLM's {@code receive_kv_from_single_worker} socket work,
 * spec §2.5, §6.13): one thread, {@code mooncake-d-io-0}, creates, polls and closes every DEALER,
 * so the thread count does not grow with the number of concurrent pulls.
 *
 * <p>Per pull: a DEALER ({@code linger=0}) connected to the P worker sends the single metadata
 * frame (a fresh one, or one whose previous pull ended with FINISH/ERROR, see {@link #release}); responses are decoded here and handed to the pull's {@link Listener} (which
 * records them at once, see {@link KvReceiver}) until a {@code FINISH} or {@code ERROR}, a decode error, the
 * receive timeout (vLLM's {@code RCVTIMEO}: abort timeout + 60 s, re-armed by each response), or
 * a disconnect after the handshake ends it.
 *
 * <p><b>JeroMQ lost poller registrations.</b> JeroMQ 0.6.0's I/O-thread poller
 * ({@code zmq.poll.Poller}) loses the selector registration of a new connection when the
 * connecter's handle for the channel is removed and the stream engine's handle for the same
 * channel is added in one loop iteration (the connect completes while the I/O thread's mailbox
 * has commands, as when sockets are created or closed at the same moment): its re-registration
 * pass either sets the interest ops on the old key, still attached to the cancelled handle, and
 * then cancels it, or finds the cancelled key and skips the new handle. The engine then never
 * hears about readable or writable data (the peer's greeting stays in the kernel's receive queue)
 * until some other handle on that I/O thread changes, which makes the poller register the handle
 * afresh. So when a DEALER has not completed its handshake after {@link #NUDGE_AFTER_MS}, this
 * class "nudges" the context's I/O thread by binding and closing a throwaway socket on
 * {@code 127.0.0.1}, which heals every lost registration on it without touching the pull's
 * connection ({@link #pollerNudges()}). The loss can also strike after the greetings: JeroMQ
 * reports {@code HANDSHAKE_PROTOCOL} (and cancels its own handshake timer) once the peer's greeting
 * is read, while the rest of ours, the READY exchange and the request still wait for that
 * registration; so the nudges go on, backing off, until the pull's first answer is read (without
 * them such a pull hung, unnoticed, until its receive deadline). A pull on a reused connection
 * (one that already carried an answer, see {@link #release}) is not nudged: the loss strikes only
 * when a connection's handles are swapped at connect time, and each nudge (a socket bound and
 * closed) costs JeroMQ's I/O and reaper threads CPU while a long write runs (issue 13). As a last
 * resort, when no handshake is seen within three handshake timeouts (times the attempt number),
 * the DEALER is closed and the request sent again on a fresh one; the request cannot have reached
 * P before the handshake, so resending is safe.
 *
 * <p><b>A disconnect after the handshake</b> (issue 9, "no write after abandonment"): the ROUTER
 * gives a reconnecting peer a new identity, so the answer is lost; but whether P can still write
 * into the pull's blocks depends on whether P is alive. The DEALER reconnects by itself: when that
 * is refused ({@code CONNECT_RETRIED}: nothing listens on P's port any more, P's process or worker
 * is gone, and a gone P writes nothing) the pull fails at once; when it succeeds (P alive, the
 * connection alone was lost) the pull fails only at its receive deadline, by which time P's
 * staleness rule guarantees that no write of this pull can start. When JeroMQ closed the connection
 * for a protocol error it does not reconnect; then a plain TCP connect to P's port (on a virtual
 * thread) tells the two cases apart the same way. vLLM always waits for the receive
 * timeout. Every disconnect is also reported to the owner ({@code addressLost}), which forgets the
 * cached address of that P worker.
 *
 * <p><b>Bounds and watchdogs.</b> Every DEALER has a maximum message size
 * ({@link SideChannelLimits#maxResponseBytes()}); a P that declares a larger frame is disconnected
 * before anything is allocated. An {@link Error} escaping the loop, or the death of the context's
 * JeroMQ I/O thread, fails the pulls in flight, is reported to the {@link HealthMonitor}, and the
 * loop goes on with fresh sockets (on a fresh context when the I/O thread died).
 */
final class PullChannels implements PullIo {

    private static final Logger LOG = LoggerFactory.getLogger(PullChannels.class);

    private static final int MONITOR_EVENTS = ZMQ.EVENT_HANDSHAKE_PROTOCOL | ZMQ.HANDSHAKE_SUCCEEDED
            | ZMQ.EVENT_DISCONNECTED | ZMQ.EVENT_CONNECT_RETRIED | ZMQ.EVENT_CONNECTED | ZMQ.EVENT_CONNECT_DELAYED;
    /**
     * After a disconnect JeroMQ reconnects within its reconnect interval (100 ms) unless it closed the
     * connection for a protocol error (then it never does); no reconnect attempt within this long means
     * the latter.
     */
    static final long NO_RECONNECT_MS = 2_000;
    static final long PROBE_TIMEOUT_MS = 2_000;
    private static final AtomicLong PROBE_IDS = new AtomicLong();
    /** A DEALER without a handshake (or, later, an answer) after this long makes the loop nudge JeroMQ's I/O thread. */
    static final long NUDGE_AFTER_MS = 100;
    /** Nudges for one DEALER back off (doubling) up to this interval: an unreachable P costs little. */
    static final long NUDGE_MAX_INTERVAL_MS = 1_600;
    private static final long MAX_POLL_MS = 50;
    private static final long JOIN_MS = 5_000;
    private static final AtomicLong MONITOR_IDS = new AtomicLong();

    /** What a pull's owner hears; called on the I/O thread, must not block. */
    interface Listener {
        /** A decoded response; the last one is FINISH or ERROR. */
        void onResponse(MooncakeXferResponse response);

        /** The pull ended without a FINISH/ERROR: timeout, disconnect, undecodable answer, shutdown. */
        void onFailure(String reason);
    }

    /** One pull request to one P worker. */
    private final class Pull {
        final String address;
        final byte[] payload;
        final Listener listener;
        ZMQ.Socket dealer;
        ZMQ.Socket monitor;
        boolean handshaken; // JeroMQ's HANDSHAKE_PROTOCOL (greetings exchanged) or an answer was read
        boolean answered; // a response of this pull was read
        boolean reused; // on an idle connection that carried an answer before: its registration works, no nudges
        long handshakeDeadline;
        long nudgeAt;
        long nudgeDelayMs;
        long receiveDeadline;
        int attempts;
        boolean disconnected; // after the handshake; the DEALER is reconnecting
        boolean reconnecting; // a reconnect attempt was seen after the disconnect
        CompletableFuture<Boolean> probe; // after a protocol error: does P's port still accept connections?
        boolean probeLogged;
        long disconnectedAt;

        Pull(String address, byte[] payload, Listener listener) {
            this.address = address;
            this.payload = payload;
            this.listener = listener;
        }
    }

    private final int maxSockets; // 0: JeroMQ's default
    private volatile ZMQ.Context context; // replaced (I/O thread) when its JeroMQ I/O thread died
    private final SideChannelLimits limits;
    private final HealthMonitor health;
    private final MsgAllocator allocator; // JeroMQ's (or a test's), guarded
    private final Consumer<String> addressLost;
    // set by a dying JeroMQ I/O thread, handled by the loop
    private volatile Throwable ioThreadDeath;
    private volatile Error injectedFault; // tests
    private final Pipe wakePipe;
    private final Thread thread;
    private final long receiveTimeoutNanos;
    private final long handshakeTimeoutNanos;
    private final BackgroundErrors errors;
    private final ConcurrentLinkedQueue<Pull> submitted = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean wakePending = new AtomicBoolean();
    private final AtomicBoolean closed = new AtomicBoolean();
    // written by close(), read by the I/O loop
    private volatile boolean running = true;
    private final List<Pull> active = new ArrayList<>(); // I/O thread only
    /** Handshaken DEALERs whose last pull ended with FINISH/ERROR, per P address (I/O thread only). */
    private final Map<String, ArrayDeque<Idle>> idle = new HashMap<>();

    private record Idle(String address, ZMQ.Socket dealer, ZMQ.Socket monitor) {
    }

    /** Idle connections kept per P worker. */
    static final int MAX_IDLE_PER_PEER = 8;

    private final LongAdder handshakeRetries = new LongAdder();
    private final LongAdder pollerNudges = new LongAdder();
    private long lastNudge = System.nanoTime(); // I/O thread only
    private boolean nudgeFailed; // I/O thread only
    private final LongAdder handshakeReconnects = new LongAdder();
    private final LongAdder pullsStarted = new LongAdder();
    private final LongAdder connectionsOpened = new LongAdder();
    // I/O thread writes, any thread reads
    private volatile int activeCount;

    PullChannels(long receiveTimeoutNanos, long handshakeTimeoutNanos, BackgroundErrors errors,
            SideChannelLimits limits, HealthMonitor health, MsgAllocator allocator, Consumer<String> addressLost)
            throws IOException {
        this(receiveTimeoutNanos, handshakeTimeoutNanos, errors, limits, health, allocator, addressLost, 0);
    }

    /** As above; {@code maxSockets > 0} caps each ZMQ context's sockets (tests; JeroMQ's default is 1024). */
    PullChannels(long receiveTimeoutNanos, long handshakeTimeoutNanos, BackgroundErrors errors,
            SideChannelLimits limits, HealthMonitor health, MsgAllocator allocator, Consumer<String> addressLost,
            int maxSockets) throws IOException {
        this.maxSockets = maxSockets;
        this.receiveTimeoutNanos = receiveTimeoutNanos;
        this.handshakeTimeoutNanos = handshakeTimeoutNanos;
        this.errors = Objects.requireNonNull(errors, "errors");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.health = Objects.requireNonNull(health, "health");
        this.allocator = new GuardedMsgAllocator(allocator, limits.maxResponseBytes(), () -> errors.report("JeroMQ decoder (D side channel)",
                new IllegalArgumentException("a P worker sent a frame header with a size of 2^63 bytes or more; "
                        + "treated as an empty frame")));
        this.addressLost = Objects.requireNonNull(addressLost, "addressLost");
        this.wakePipe = Pipe.open();
        wakePipe.sink().configureBlocking(false);
        wakePipe.source().configureBlocking(false);
        this.context = newContext();
        this.thread = new Thread(this::run, "mooncake-d-io-0");
        thread.setDaemon(true);
        thread.start();
    }

    /** Starts a pull; thread-safe. After {@link #close()} the listener hears a failure at once. */
    @Override
    public void submit(String address, byte[] payload, Listener listener) {
        if (!running) {
            listener.onFailure("the Mooncake receiver is closed");
            return;
        }
        submitted.add(new Pull(address, payload, listener));
        wake();
    }

    /** DEALERs replaced (closed and opened afresh) after no handshake within three handshake timeouts. */
    @Override
    public long handshakeRetries() {
        return handshakeRetries.sum();
    }

    /** Times the I/O thread nudged JeroMQ's poller because a DEALER waited for its handshake. */
    @Override
    public long pollerNudges() {
        return pollerNudges.sum();
    }

    /** Connections JeroMQ dropped before their handshake (its handshake timer) and re-made on the same socket. */
    @Override
    public long handshakeReconnects() {
        return handshakeReconnects.sum();
    }

    @Override
    public long pullsStarted() {
        return pullsStarted.sum();
    }

    /** New DEALER connections made (retries included); below {@link #pullsStarted()} when connections are reused. */
    @Override
    public long connectionsOpened() {
        return connectionsOpened.sum();
    }

    @Override
    public int activePulls() {
        return activeCount;
    }

    private void wake() {
        if (wakePending.compareAndSet(false, true)) {
            try {
                wakePipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
            } catch (IOException e) {
                LOG.debug("wake-up pipe closed", e);
            }
        }
    }

    private ZMQ.Context newContext() {
        ZMQ.Context ctx = ZMQ.context(1);
        if (maxSockets > 0) {
            ctx.setMaxSockets(maxSockets);
        }
        ctx.setUncaughtExceptionHandler((t, e) -> {
            ioThreadDeath = e;
            wake();
        });
        ctx.setNotificationExceptionHandler((t, e) -> errors.report("JeroMQ I/O (D side channel)", e));
        return ctx;
    }

    /** Makes the next loop iteration throw {@code fault} (tests of the watchdog). */
    @Override
    public void injectFault(Error fault) {
        injectedFault = fault;
        wake();
    }

    /** Whether the I/O thread is running (false after close, or after a death it could not recover from). */
    @Override
    public boolean alive() {
        return thread.isAlive();
    }

    private void run() {
        try {
            while (running) {
                try (SocketWaiter poller = new SocketWaiter()) {
                    try {
                        serve(poller);
                    } catch (RuntimeException | Error e) {
                        if (!running) {
                            break;
                        }
                        health.died(thread.getName() + " (D side-channel I/O)", e, true);
                        abandonAll(poller, "the Mooncake pull I/O thread failed: " + e, true);
                        health.recovered(thread.getName());
                    }
                    Throwable dead = ioThreadDeath;
                    if (dead != null && running) {
                        ioThreadDeath = null;
                        health.died("JeroMQ I/O thread of D's side channel", dead, true);
                        abandonAll(poller, "the JeroMQ I/O thread of the Mooncake receiver died: " + dead, false);
                        // the dead context cannot be terminated (its I/O thread would never acknowledge); drop it
                        context = newContext();
                        health.recovered("JeroMQ I/O thread of D's side channel");
                    }
                }
            }
        } finally {
            abandonAll(null, "the Mooncake receiver is closed", true);
            Pull p;
            while ((p = submitted.poll()) != null) {
                p.listener.onFailure("the Mooncake receiver is closed");
            }
            activeCount = 0;
        }
    }

    /** Fails every pull in flight and forgets every connection; closes the sockets when {@code close}. */
    private void abandonAll(SocketWaiter poller, String reason, boolean close) {
        for (Pull pull : active) {
            if (close) {
                closeSockets(pull, poller);
            }
            pull.listener.onFailure(reason);
        }
        active.clear();
        for (ArrayDeque<Idle> q : idle.values()) {
            for (Idle i : q) {
                if (close) {
                    closeIdle(i, poller);
                }
            }
        }
        idle.clear();
        activeCount = 0;
    }

    /** The loop on one context; returns when stopping or when the context's I/O thread died. */
    private void serve(SocketWaiter poller) {
        poller.register(wakePipe.source());
        ByteBuffer drain = ByteBuffer.allocate(64);
        while (running && ioThreadDeath == null) {
            try {
                Error fault = injectedFault;
                if (fault != null) {
                    injectedFault = null;
                    throw fault;
                }
                long waitMs = MAX_POLL_MS;
                poller.await(waitMs);
                wakePending.set(false);
                drain.clear();
                while (wakePipe.source().read(drain) > 0) {
                    drain.clear();
                }
                Pull p;
                while ((p = submitted.poll()) != null) {
                    start(p, poller);
                }
                long now = System.nanoTime();
                for (int i = active.size() - 1; i >= 0; i--) {
                    Pull pull = active.get(i);
                    if (!service(pull, now, poller)) {
                        active.remove(i);
                    }
                }
                activeCount = active.size();
                serviceIdle(poller);
            } catch (ZMQException e) {
                if (e.getErrorCode() == ZMQ.Error.ETERM.getCode()) {
                    running = false;
                    break;
                }
                errors.report("pull I/O", e);
            } catch (IOException | RuntimeException e) {
                errors.report("pull I/O", e);
            }
        }
    }

    private void start(Pull pull, SocketWaiter poller) {
        pullsStarted.increment();
        pull.receiveDeadline = System.nanoTime() + receiveTimeoutNanos;
        ArrayDeque<Idle> pool = idle.get(pull.address);
        Idle reuse = pool == null ? null : pool.pollLast();
        while (reuse != null && !stillConnected(reuse)) {
            // its disconnect (or a refused reconnect) predates this pull: not evidence about this pull
            closeIdle(reuse, poller);
            addressLost.accept(reuse.address());
            reuse = pool.pollLast();
        }
        if (reuse != null) {
            pull.dealer = reuse.dealer();
            pull.monitor = reuse.monitor();
            pull.handshaken = true;
            pull.reused = true;
            pull.attempts = 1;
            pull.nudgeDelayMs = NUDGE_AFTER_MS;
            pull.nudgeAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(NUDGE_AFTER_MS);
            WaveTrace.mark(WaveTrace.Point.D_PULL_SENT);
            if (pull.dealer.send(pull.payload, ZMQ.DONTWAIT)) {
                active.add(pull);
                return;
            }
            closeSockets(pull, poller); // full or broken: fall back to a fresh connection
            pull.attempts = 0;
        }
        try {
            open(pull, poller);
            active.add(pull);
        } catch (RuntimeException e) {
            closeSockets(pull, poller);
            checkExhausted(e);
            pull.listener.onFailure("cannot connect to " + pull.address + ": " + e);
        }
    }

    private void open(Pull pull, SocketWaiter poller) {
        connectionsOpened.increment();
        pull.attempts++;
        pull.handshaken = false;
        pull.reused = false;
        // Attempt n lets JeroMQ's own handshake timer drop a stuck connection after n handshake
        // timeouts and reconnect (the request stays queued in the socket: nothing is written before
        // the handshake); this socket is replaced only if that did not help within three times as
        // long. Growing with n: no endless retrying when a loaded machine makes every handshake slow.
        long ivlNanos = handshakeTimeoutNanos * pull.attempts;
        long now = System.nanoTime();
        pull.handshakeDeadline = now + 3 * ivlNanos;
        pull.nudgeDelayMs = NUDGE_AFTER_MS;
        pull.nudgeAt = now + TimeUnit.MILLISECONDS.toNanos(NUDGE_AFTER_MS);
        ZMQ.Socket dealer = context.socket(SocketType.DEALER);
        pull.dealer = dealer;
        dealer.setLinger(0);
        dealer.setMaxMsgSize(limits.maxResponseBytes());
        dealer.setMsgAllocator(allocator);
        dealer.setHandshakeIvl((int) Math.min(Integer.MAX_VALUE, Math.max(1, TimeUnit.NANOSECONDS.toMillis(ivlNanos))));
        String monitorAddr = "inproc://mooncake-d-monitor-" + MONITOR_IDS.getAndIncrement();
        if (!dealer.monitor(monitorAddr, MONITOR_EVENTS)) { // before connect: no event is missed
            throw new IllegalStateException("cannot monitor a DEALER socket");
        }
        ZMQ.Socket monitor = context.socket(SocketType.PAIR);
        pull.monitor = monitor;
        monitor.setLinger(0);
        monitor.connect(monitorAddr);
        poller.register(dealer);
        poller.register(monitor);
        dealer.connect(pull.address);
        WaveTrace.mark(WaveTrace.Point.D_PULL_SENT);
        if (!dealer.send(pull.payload, ZMQ.DONTWAIT)) {
            throw new IllegalStateException("the DEALER refused the request (errno " + dealer.errno() + ")");
        }
    }

    /** Reads what arrived and checks deadlines; false when the pull is over (sockets closed). */
    private boolean service(Pull pull, long now, SocketWaiter poller) {
        ZEvent ev;
        while ((ev = ZEvent.recv(pull.monitor, ZMQ.DONTWAIT)) != null) {
            ZMonitor.Event e = ev.getEvent();
            if (e == ZMonitor.Event.HANDSHAKE_PROTOCOL || e == ZMonitor.Event.HANDSHAKE_SUCCEEDED) {
                if (pull.disconnected && !pull.handshaken) {
                    LOG.warn("side-channel connection to {} was lost and re-made: P is alive but its answer to this "
                            + "pull is lost; the pull fails at its receive deadline (P starts no write after it)",
                            pull.address);
                }
                if (!pull.handshaken) {
                    // the READY exchange is still ahead and JeroMQ just cancelled its handshake timer
                    pull.nudgeDelayMs = NUDGE_AFTER_MS;
                    pull.nudgeAt = now + TimeUnit.MILLISECONDS.toNanos(NUDGE_AFTER_MS);
                }
                pull.handshaken = true;
            } else if (e == ZMonitor.Event.DISCONNECTED && !pull.handshaken) {
                handshakeReconnects.increment(); // JeroMQ's handshake timer dropped a stuck connection; it reconnects
                LOG.debug("DEALER connection to {} dropped before its handshake; JeroMQ reconnects", pull.address);
            } else if (e == ZMonitor.Event.DISCONNECTED) {
                // drain what came before the disconnect first
                if (!readResponses(pull, poller)) {
                    return false;
                }
                pull.disconnected = true;
                pull.reconnecting = false;
                pull.disconnectedAt = System.nanoTime();
                pull.handshaken = false;
                addressLost.accept(pull.address);
            } else if ((e == ZMonitor.Event.CONNECTED || e == ZMonitor.Event.CONNECT_DELAYED) && pull.disconnected) {
                pull.reconnecting = true;
            } else if (e == ZMonitor.Event.CONNECT_RETRIED && pull.disconnected) {
                closeSockets(pull, poller);
                pull.listener.onFailure("P worker " + pull.address + " disconnected before answering and no longer "
                        + "accepts connections");
                return false;
            }
        }
        if (!readResponses(pull, poller)) {
            return false;
        }
        if (pull.disconnected && !pull.reconnecting && pull.probe == null
                && now - pull.disconnectedAt > TimeUnit.MILLISECONDS.toNanos(NO_RECONNECT_MS)) {
            // JeroMQ closed the connection for a protocol error and will not reconnect: is P still there?
            pull.probe = probe(pull.address);
        }
        if (pull.probe != null && pull.probe.isDone()) {
            if (pull.probe.getNow(Boolean.TRUE)) {
                pull.probe = CompletableFuture.completedFuture(Boolean.TRUE); // alive: wait for the deadline
                if (!pull.probeLogged) {
                    pull.probeLogged = true;
                    LOG.warn("P worker {} broke the ZMTP protocol (an oversized or malformed frame) but still accepts "
                            + "connections; the pull fails at its receive deadline (P starts no write after it)",
                            pull.address);
                }
            } else {
                closeSockets(pull, poller);
                pull.listener.onFailure("P worker " + pull.address + " broke the ZMTP protocol (an oversized or "
                        + "malformed frame) and no longer accepts connections");
                return false;
            }
        }
        if (!pull.answered && !pull.reused && !pull.disconnected && now - pull.nudgeAt > 0) {
            pull.nudgeDelayMs = Math.min(NUDGE_MAX_INTERVAL_MS, 2 * pull.nudgeDelayMs);
            pull.nudgeAt = now + TimeUnit.MILLISECONDS.toNanos(pull.nudgeDelayMs);
            nudge(now);
        }
        if (!pull.handshaken && !pull.disconnected && now - pull.handshakeDeadline > 0) {
            handshakeRetries.increment();
            LOG.info("DEALER connection to {} made no ZMTP handshake within {} ms (attempt {}); retrying on a fresh "
                    + "socket", pull.address, TimeUnit.NANOSECONDS.toMillis(3 * handshakeTimeoutNanos * pull.attempts),
                    pull.attempts);
            closeSockets(pull, poller);
            try {
                open(pull, poller);
            } catch (RuntimeException e) {
                closeSockets(pull, poller);
                checkExhausted(e);
                pull.listener.onFailure("cannot connect to " + pull.address + ": " + e);
                return false;
            }
        }
        if (now - pull.receiveDeadline > 0) {
            closeSockets(pull, poller);
            pull.listener.onFailure(String.format(Locale.ROOT, "no answer from %s within %d ms (receive timeout)",
                    pull.address, TimeUnit.NANOSECONDS.toMillis(receiveTimeoutNanos)));
            return false;
        }
        return true;
    }

    /** Reads every waiting response; false when the pull ended (FINISH/ERROR/undecodable). */
    private boolean readResponses(Pull pull, SocketWaiter poller) {
        byte[] msg;
        while ((msg = pull.dealer.recv(ZMQ.DONTWAIT)) != null) {
            WaveTrace.mark(WaveTrace.Point.D_RESPONSE_READ);
            pull.handshaken = true;
            pull.answered = true;
            pull.receiveDeadline = System.nanoTime() + receiveTimeoutNanos;
            MooncakeXferResponse resp;
            try {
                resp = MooncakeXferResponseCodec.decode(msg);
            } catch (RuntimeException e) {
                closeSockets(pull, poller);
                pull.listener.onFailure(e.toString());
                return false;
            }
            boolean last = resp.status() != MooncakeXferResponseStatus.CONTINUE;
            if (last) {
                release(pull, poller);
            }
            pull.listener.onResponse(resp);
            if (last) {
                return false;
            }
        }
        return true;
    }

    /**
     * After a FINISH/ERROR nothing more comes for that request, so the connection is kept for the
     * next pull to the same P worker (fewer new connections, hence fewer stuck handshakes); vLLM
     * opens a fresh DEALER per pull, which the P side cannot tell apart.
     */
    private void release(Pull pull, SocketWaiter poller) {
        ArrayDeque<Idle> pool = idle.computeIfAbsent(pull.address, a -> new ArrayDeque<>());
        if (running && pool.size() < MAX_IDLE_PER_PEER) {
            pool.addLast(new Idle(pull.address, pull.dealer, pull.monitor));
            pull.dealer = null;
            pull.monitor = null;
        } else {
            closeSockets(pull, poller);
        }
    }

    /**
     * Whether something accepts TCP connections at a {@code tcp://host:port} address, tried on a
     * virtual thread (at most {@link #PROBE_TIMEOUT_MS}); true when unsure.
     */
    private static CompletableFuture<Boolean> probe(String address) {
        CompletableFuture<Boolean> f = new CompletableFuture<>();
        Thread.ofVirtual().name("mooncake-d-probe-" + PROBE_IDS.getAndIncrement()).start(() -> {
            try {
                String hp = address.substring(address.indexOf("://") + 3);
                int colon = hp.lastIndexOf(':');
                String host = hp.substring(0, colon);
                if (host.startsWith("[") && host.endsWith("]")) {
                    host = host.substring(1, host.length() - 1);
                }
                int port = Integer.parseInt(hp.substring(colon + 1));
                try (java.net.Socket s = new java.net.Socket()) {
                    s.connect(new java.net.InetSocketAddress(host, port), (int) PROBE_TIMEOUT_MS);
                }
                f.complete(Boolean.TRUE);
            } catch (java.net.ConnectException e) {
                f.complete(Boolean.FALSE); // refused: nothing listens there any more
            } catch (IOException | RuntimeException e) {
                f.complete(Boolean.TRUE); // unreachable or odd: P may be alive, so wait for the deadline
            }
        });
        return f;
    }

    /** Reads an idle connection's pending monitor events: false when it lost its connection meanwhile. */
    private static boolean stillConnected(Idle i) {
        boolean ok = true;
        ZEvent ev;
        while ((ev = ZEvent.recv(i.monitor(), ZMQ.DONTWAIT)) != null) {
            ZMonitor.Event e = ev.getEvent();
            ok &= e != ZMonitor.Event.DISCONNECTED && e != ZMonitor.Event.CONNECT_RETRIED;
        }
        return ok;
    }

    /** Drops idle connections that disconnected or received something unexpected. */
    private void serviceIdle(SocketWaiter poller) {
        for (Iterator<ArrayDeque<Idle>> qi = idle.values().iterator(); qi.hasNext(); ) {
            ArrayDeque<Idle> q = qi.next();
            for (Iterator<Idle> it = q.iterator(); it.hasNext(); ) {
                Idle i = it.next();
                boolean drop = false;
                ZEvent ev;
                while ((ev = ZEvent.recv(i.monitor(), ZMQ.DONTWAIT)) != null) {
                    drop |= ev.getEvent() == ZMonitor.Event.DISCONNECTED;
                }
                if (drop) {
                    addressLost.accept(i.address());
                }
                if (i.dealer().recv(ZMQ.DONTWAIT) != null) {
                    LOG.warn("unexpected message on an idle side-channel connection; closing it");
                    drop = true;
                }
                if (drop) {
                    closeIdle(i, poller);
                    it.remove();
                }
            }
            if (q.isEmpty()) {
                qi.remove();
            }
        }
    }

    /**
     * Makes JeroMQ's I/O thread re-register its handles (see the class comment): a socket bound to
     * an OS-assigned loopback port and closed adds and removes a poller handle there. At most once
     * per {@link #NUDGE_AFTER_MS} however many pulls wait: one nudge heals every lost registration.
     */
    private void nudge(long now) {
        if (now - lastNudge < TimeUnit.MILLISECONDS.toNanos(NUDGE_AFTER_MS)) {
            return;
        }
        lastNudge = now;
        pollerNudges.increment();
        LOG.debug("a DEALER waits for its ZMTP handshake; nudging JeroMQ's I/O thread");
        try (ZMQ.Socket s = context.socket(SocketType.PAIR)) {
            s.setLinger(0);
            s.bindToRandomPort("tcp://127.0.0.1");
        } catch (ZMQException e) {
            if (checkExhausted(e)) {
                return;
            }
            // no IPv4 loopback? the handshake timer and the socket replacement still recover
            if (!nudgeFailed) {
                nudgeFailed = true;
                errors.report("nudging JeroMQ's I/O thread (bind on 127.0.0.1)", e);
            }
        }
    }

    /**
     * Reports a context without a free socket slot (JeroMQ's EMFILE; its limit is the context's
     * {@code maxSockets}, not the OS's file limit) to the {@link HealthMonitor}: ERROR once, the
     * worker unhealthy. True when {@code e} was that.
     */
    private boolean checkExhausted(RuntimeException e) {
        if (!(e instanceof ZMQException z) || z.getErrorCode() != ZError.EMFILE) {
            return false;
        }
        health.exhausted(thread.getName() + " (D side-channel ZMQ context)", String.format(Locale.ROOT,
                "no free socket slot (at most %d sockets; %d pulls in flight, %d idle connections): sockets leak or "
                + "too many pulls run at once; pulls fail until slots free up", context.getMaxSockets(),
                active.size(), idle.values().stream().mapToInt(ArrayDeque::size).sum()), e);
        return true;
    }

    private static void closeIdle(Idle i, SocketWaiter poller) {
        if (poller != null) {
            poller.unregister(i.dealer());
            poller.unregister(i.monitor());
        }
        closeDealer(i.dealer());
        i.monitor().close();
    }

    /**
     * Stops the DEALER's monitor, then closes it; the caller closes the monitor's PAIR afterwards.
     * JeroMQ 0.6.0 writes each monitor event with a blocking send on its internal PAIR, on the
     * context's I/O thread, and stops that monitor only when the closed DEALER is finally destroyed.
     * A DEALER closed while it still emits events (reconnecting to a P that died: an event every
     * reconnect interval) would have the I/O thread block for ever on a PAIR whose peer, our monitor
     * socket, is gone: no handshake completes any more and no closed socket is ever reaped, so the
     * context runs out of socket slots (EMFILE). {@code monitor(null, 0)} stops the monitor at once
     * (later events are dropped) while our PAIR is still connected.
     */
    private static void closeDealer(ZMQ.Socket dealer) {
        try {
            dealer.monitor(null, 0);
        } finally {
            dealer.close();
        }
    }

    private static void closeSockets(Pull pull, SocketWaiter poller) {
        if (pull.dealer != null) {
            if (poller != null) {
                poller.unregister(pull.dealer);
            }
            closeDealer(pull.dealer);
            pull.dealer = null;
        }
        if (pull.monitor != null) {
            if (poller != null) {
                poller.unregister(pull.monitor);
            }
            pull.monitor.close();
            pull.monitor = null;
        }
    }

    /** Stops the I/O thread (failing pulls still open), then closes the pipe and the context. Idempotent. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        running = false;
        wake();
        try {
            thread.join(JOIN_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            wakePipe.sink().close();
            wakePipe.source().close();
        } catch (IOException e) {
            LOG.debug("closing the wake-up pipe", e);
        }
        if (thread.isAlive()) {
            LOG.error("{} did not stop within {} ms; its ZMQ context is left open", thread.getName(), JOIN_MS);
        } else {
            context.close();
        }
    }
}
