package io.mooncake4j.connector.worker;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.Pipe;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;
import zmq.msg.MsgAllocator;

/**
 * The producer's side channel (vLLM's {@code _mooncake_sender_listener} plus the sender loop) on
 * JeroMQ ({@code side_channel_zmq: jeromq}; the default is {@link ZmtpSenderListener}).
 *
 * <p>Threads: {@code mooncake-p-listener-0} creates, binds, polls and closes the ROUTER socket and
 * is the only thread that touches it. Received messages are handed to {@code mooncake-p-sender-0},
 * a single-thread executor that runs the {@link SideChannelHandler}. Replies from any thread go
 * into a {@link ConcurrentLinkedQueue}; the sender of a reply wakes the listener through a
 * {@link Pipe} the listener waits on with the ROUTER ({@link SocketWaiter}; a pipe write is
 * thread-safe, a ZMQ socket is not).
 *
 * <p>Unlike vLLM (spec §15 #6) nothing a peer sends ends the listener: a message with the wrong
 * frame count is counted and delivered, an exception in the handler or the loop is logged once
 * per distinct error and counted.
 *
 * <p><b>Bounds and watchdogs (issue 9).</b> The ROUTER has a maximum message size
 * ({@link SideChannelLimits#maxMetadataBytes()}): JeroMQ checks a frame's declared size before it
 * allocates, and drops the peer that declared too much. Messages handed to the sender loop and not yet
 * handled are bounded in bytes ({@link #backlogBudget}); above it the listener stops reading and
 * ZMQ's receive high-water mark pushes back on the peers, until the handler task that brings the backlog
 * back under the budget wakes it (it does not wait for its poll bound). An {@link Error} that escapes the loop
 * (say an {@code OutOfMemoryError}) is reported to the {@link HealthMonitor} and the ROUTER is
 * recreated on the same port; the death of one of JeroMQ's I/O threads (its context's uncaught
 * exception handler) cannot be recovered in-process (the dead thread keeps the port) and marks the
 * worker unhealthy.
 */
final class SenderListener implements SideChannelListener {

    private static final Logger LOG = LoggerFactory.getLogger(SenderListener.class);

    /** Poll bound, so a lost wake-up can never delay shutdown by more than this. */
    static final long POLL_MS = 100;
    /** Messages read per loop iteration before replies get a turn. */
    private static final int RECV_BATCH = 256;
    private static final long JOIN_MS = 5_000;
    private static final int MAX_DISTINCT_ERRORS = 1024;

    private record Reply(byte[] identity, byte[] payload) {}

    /** What the ROUTER's owner must do before the ROUTER's port closes (implemented by {@link KvSender}). */
    interface Quiesce {
        /** Ends every pull being served: none of their waves starts after this completes. */
        CompletableFuture<Void> abandonAllPulls(String reason);

        /** No write of an ended pull is still running. */
        boolean writesIdle();
    }

    /** How long a reset or close waits for running writes before it closes the port anyway. */
    static final long QUIESCE_MS = 30_000;

    /**
     * Ends every pull and waits (at most {@code waitMs}) for their running writes, so that the port
     * closes only when no write can still land in a D's blocks (D fails a pull at once when the port
     * refuses it after a disconnect; see {@link PullChannels}). Returns whether it got there.
     */
    static boolean quiesce(Quiesce q, String reason, long waitMs) {
        if (q == null) {
            return true;
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        try {
            q.abandonAllPulls(reason).get(waitMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException
                 | RejectedExecutionException e) {
            LOG.error("could not abandon the side-channel pulls before closing the ROUTER: {}", e.toString());
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        while (!q.writesIdle()) {
            if (System.nanoTime() - deadline > 0) {
                LOG.error("a write of an abandoned pull still runs after {} ms; closing the ROUTER anyway", waitMs);
                return false;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5)); // bounded wait for the transfer pool
        }
        return true;
    }

    /** How long a recreated ROUTER may take to get its port back. */
    private static final long REBIND_MS = 10_000;

    private final String hostname;
    private final Supplier<SideChannelHandler> handler;
    private final SideChannelLimits limits;
    private final Supplier<? extends Quiesce> quiesce;
    private final HealthMonitor health;
    private final MsgAllocator allocator; // JeroMQ's (or a test's), guarded
    private final long backlogBudget;
    private final AtomicLong backlogBytes = new AtomicLong();
    // set by the listener when it stops reading at the backlog budget; the handler task that brings the
    // backlog back under it clears it and wakes the listener (else it would wait out its poll bound)
    private final AtomicBoolean backlogPaused = new AtomicBoolean();
    private final long pollMs;
    // a fault the next loop iteration throws (tests)
    private volatile Error injectedFault;
    // set when one of the context's JeroMQ I/O threads died: the context can then never be terminated
    private volatile boolean ioThreadDied;
    private final ZMQ.Context context;
    private final Pipe wakePipe;
    private final ByteBuffer wakeDrain = ByteBuffer.allocate(64); // listener thread only
    private final Thread thread;
    private final ScheduledExecutorService senderLoop;
    // the sender loop's current thread (the pool replaces one that a task killed)
    private final AtomicReference<Thread> senderThread = new AtomicReference<>();
    private final CompletableFuture<Integer> ready = new CompletableFuture<>();
    private final ConcurrentLinkedQueue<Reply> replies = new ConcurrentLinkedQueue<>();
    // set by the first waker, cleared by the listener before it drains the queue
    private final AtomicBoolean wakePending = new AtomicBoolean();
    // written by close(), read by the listener loop
    private volatile boolean running = true;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Map<String, Boolean> reportedErrors = new ConcurrentHashMap<>();

    private final LongAdder received = new LongAdder();
    private final LongAdder malformed = new LongAdder();
    private final LongAdder handlerErrors = new LongAdder();
    private final LongAdder repliesSent = new LongAdder();
    private final LongAdder repliesDropped = new LongAdder();
    private final LongAdder listenerErrors = new LongAdder();
    private final LongAdder backlogPauses = new LongAdder();
    private final LongAdder backlogWakeUps = new LongAdder(); // tests

    /** Creates the context, pipe and threads and starts listening; {@link #ready()} completes with the port. */
    SenderListener(String hostname, Supplier<SideChannelHandler> handler, SideChannelLimits limits,
            HealthMonitor health, MsgAllocator allocator, Supplier<? extends Quiesce> quiesce) throws IOException {
        this(hostname, handler, limits, health, allocator, quiesce, POLL_MS);
    }

    /** As above, with the loop's poll bound (tests: a long bound shows that nothing waits for it). */
    SenderListener(String hostname, Supplier<SideChannelHandler> handler, SideChannelLimits limits,
            HealthMonitor health, MsgAllocator allocator, Supplier<? extends Quiesce> quiesce, long pollMs)
            throws IOException {
        if (pollMs <= 0) {
            throw new IllegalArgumentException("pollMs must be positive: " + pollMs);
        }
        this.pollMs = pollMs;
        this.quiesce = Objects.requireNonNull(quiesce, "quiesce");
        this.hostname = Objects.requireNonNull(hostname, "hostname");
        this.handler = Objects.requireNonNull(handler, "handler");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.health = Objects.requireNonNull(health, "health");
        this.allocator = new GuardedMsgAllocator(allocator, limits.maxMetadataBytes(), () -> reportOnce("JeroMQ decoder",
                new IllegalArgumentException("a peer sent a frame header with a size of 2^63 bytes or more; "
                        + "treated as an empty frame")));
        this.backlogBudget = Math.max(4 * limits.maxMetadataBytes(), 1L << 20);
        this.wakePipe = Pipe.open();
        try {
            wakePipe.sink().configureBlocking(false);
            wakePipe.source().configureBlocking(false);
        } catch (IOException e) {
            closePipe();
            throw e;
        }
        this.context = ZMQ.context(1);
        // before the first socket: JeroMQ's I/O threads are made with these handlers
        context.setUncaughtExceptionHandler((t, e) -> {
            ioThreadDied = true;
            health.died("JeroMQ I/O thread " + t.getName() + " of P's side channel on " + hostname, e, false);
        });
        context.setNotificationExceptionHandler(this::jeromqNotification);
        ScheduledThreadPoolExecutor loop = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "mooncake-p-sender-0");
            t.setDaemon(true);
            senderThread.set(t);
            return t;
        });
        loop.setRemoveOnCancelPolicy(true);
        loop.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        loop.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
        loop.prestartAllCoreThreads();
        this.senderLoop = loop;
        this.thread = new Thread(this::run, "mooncake-p-listener-0");
        thread.setDaemon(true);
        thread.start();
    }

    /** Completes with the bound port, or exceptionally when binding failed or the listener exited first. */
    @Override
    public CompletableFuture<Integer> ready() {
        return ready;
    }

    /** The single sender-loop thread, where the handler runs (also runs the send path's timeouts). */
    @Override
    public ScheduledExecutorService senderLoop() {
        return senderLoop;
    }

    @Override
    public ListenerStats stats() {
        return new ListenerStats(received.sum(), malformed.sum(), handlerErrors.sum(), repliesSent.sum(),
                repliesDropped.sum(), listenerErrors.sum(), backlogPauses.sum(), 0);
    }

    /** Whether the listener thread runs (false after close or after a death it could not recover from). */
    @Override
    public boolean alive() {
        return thread.isAlive();
    }

    /** Makes the next loop iteration throw {@code fault} (tests of the watchdog). */
    @Override
    public void injectFault(Error fault) {
        injectedFault = fault;
        wake();
    }

    private ZMQ.Socket openRouter(int port) {
        ZMQ.Socket router = context.socket(SocketType.ROUTER);
        try {
            router.setLinger(0);
            router.setMaxMsgSize(limits.maxMetadataBytes());
            router.setMsgAllocator(allocator);
            return router;
        } catch (RuntimeException e) {
            router.close();
            throw e;
        }
    }

    private void run() {
        ZMQ.Socket router = null;
        int port;
        try {
            router = openRouter(0);
            port = router.bindToRandomPort("tcp://" + hostname);
        } catch (RuntimeException | Error e) {
            LOG.debug("Mooncake sender listener failed to start on {}", hostname, e);
            ready.completeExceptionally(e);
            if (router != null) {
                router.close();
            }
            return;
        }
        LOG.debug("Mooncake sender starting listening on path: tcp://{}:{}", hostname, port);
        ready.complete(port);
        try {
            while (running) {
                try {
                    serve(router);
                } catch (RuntimeException | Error e) {
                    if (!running) {
                        break;
                    }
                    health.died(thread.getName() + " (side-channel ROUTER on " + hostname + ":" + port + ")", e,
                            true);
                    // the new ROUTER will not know the peers' identities: end their pulls first, and close
                    // the port only once no write of theirs runs
                    quiesce(quiesce.get(), "the side-channel ROUTER is being recreated", QUIESCE_MS);
                    router.close();
                    router = null;
                    router = rebind(port);
                    if (router == null) {
                        return;
                    }
                    health.recovered(thread.getName());
                }
            }
        } finally {
            if (router != null) {
                router.close();
            }
            Reply r;
            while ((r = replies.poll()) != null) {
                repliesDropped.increment();
                LOG.trace("dropping reply of {} bytes: listener stopped", r.payload.length);
            }
        }
    }

    /** A fresh ROUTER on the port decode workers know; null (reported) when it cannot be had back. */
    private ZMQ.Socket rebind(int port) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REBIND_MS);
        RuntimeException last = null;
        while (running) {
            ZMQ.Socket router = null;
            try {
                router = openRouter(port);
                router.bind("tcp://" + hostname + ":" + port);
                return router;
            } catch (RuntimeException e) {
                last = e;
                if (router != null) {
                    router.close();
                }
            }
            if (System.nanoTime() - deadline > 0) {
                health.recoveryFailed(thread.getName() + " (side-channel ROUTER on " + hostname + ":" + port + ")",
                        last);
                return null;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // the old socket's port is released asynchronously
        }
        return null;
    }

    /** The loop over one ROUTER; returns when stopping, throws what it cannot handle itself. */
    private void serve(ZMQ.Socket router) {
        try (SocketWaiter poller = new SocketWaiter()) { // not ZMQ.Poller: see SocketWaiter
            poller.register(router);
            poller.register(wakePipe.source());
            boolean moreInput = false;
            while (running) {
                try {
                    Error fault = injectedFault;
                    if (fault != null) {
                        injectedFault = null;
                        throw fault;
                    }
                    poller.await(moreInput ? 0 : pollMs);
                    drainWakePipe(); // a non-blocking read: cheaper than asking which channel was ready
                    sendReplies(router);
                    // read whether or not the poller reported POLLIN: a ZMQ socket's readiness is
                    // edge-triggered, so a missed edge must not leave messages unread
                    moreInput = receive(router);
                } catch (ZMQException e) {
                    if (e.getErrorCode() == ZMQ.Error.ETERM.getCode()) {
                        LOG.debug("ZMQ context terminated, exiting Mooncake sender listener.");
                        running = false;
                        break;
                    }
                    loopError(e);
                } catch (RuntimeException e) {
                    loopError(e);
                } catch (IOException e) {
                    loopError(new java.io.UncheckedIOException("waiting for the ROUTER failed", e));
                }
            }
        }
    }

    private void loopError(RuntimeException e) {
        listenerErrors.increment();
        reportOnce("listener", e);
    }

    private void drainWakePipe() {
        wakePending.set(false); // before draining replies: a later waker writes again
        ByteBuffer buf = wakeDrain;
        buf.clear();
        try {
            while (wakePipe.source().read(buf) > 0) {
                buf.clear();
            }
        } catch (IOException e) {
            loopError(new IllegalStateException("reading the wake-up pipe failed", e));
        }
    }

    private void sendReplies(ZMQ.Socket router) {
        Reply r;
        while ((r = replies.poll()) != null) {
            WaveTrace.mark(WaveTrace.Point.P_REPLY_SENT);
            boolean ok = router.sendMore(r.identity) && router.send(r.payload, ZMQ.DONTWAIT);
            if (LOG.isTraceEnabled()) {
                LOG.trace("side-channel reply of {} bytes: {}", r.payload.length, ok ? "sent" : "dropped");
            }
            if (ok) {
                repliesSent.increment();
            } else {
                repliesDropped.increment();
            }
        }
    }

    /** Reads up to {@link #RECV_BATCH} messages; true when the batch filled up (more may be waiting). */
    private boolean receive(ZMQ.Socket router) {
        for (int i = 0; i < RECV_BATCH; i++) {
            if (backlogBytes.get() > backlogBudget && pauseOnBacklog()) {
                backlogPauses.increment();
                return false; // the sender loop is behind: leave the rest in ZMQ's queues (its HWM pushes back)
            }
            byte[] identity = router.recv(ZMQ.DONTWAIT);
            if (identity == null) {
                return false;
            }
            List<byte[]> frames = new ArrayList<>(1);
            while (router.hasReceiveMore()) {
                byte[] f = router.recv(0);
                if (f == null) {
                    break;
                }
                frames.add(f);
            }
            received.increment();
            WaveTrace.mark(WaveTrace.Point.P_RECEIVED);
            if (LOG.isTraceEnabled()) {
                LOG.trace("side-channel message: {} payload frame(s)", frames.size());
            }
            if (frames.size() != 1) {
                malformed.increment();
                if (LOG.isDebugEnabled()) {
                    LOG.debug("Malformed side-channel message: {} frame(s) after the identity, expected 1", frames.size());
                }
            }
            dispatch(identity, List.copyOf(frames));
        }
        return true;
    }

    /**
     * Whether the listener is to stop reading: flags the pause, then checks the backlog again, so that a
     * handler that brought it under the budget in between is not missed (it checks the flag after it
     * lowered the backlog: one of the two sees the other's write).
     */
    private boolean pauseOnBacklog() {
        backlogPaused.set(true); // left set when drained meanwhile: a handler then wakes us once, harmlessly
        return backlogBytes.get() > backlogBudget;
    }

    /** Called by a handler task after it lowered the backlog to {@code now}: wakes a listener paused on it. */
    private void backlogLowered(long now) {
        if (now <= backlogBudget && backlogPaused.get() && backlogPaused.compareAndSet(true, false)) {
            backlogWakeUps.increment();
            wake();
        }
    }

    /** Times a handler task woke the listener because the backlog went back under its budget (tests). */
    @Override
    public long backlogWakeUps() {
        return backlogWakeUps.sum();
    }

    private void dispatch(byte[] identity, List<byte[]> frames) {
        ReplySink sink = payload -> reply(identity, payload);
        long bytes = identity.length;
        for (byte[] f : frames) {
            bytes += f.length;
        }
        long held = bytes;
        backlogBytes.addAndGet(held);
        try {
            senderLoop.execute(() -> {
                try {
                    handler.get().onMessage(identity, frames, sink);
                } catch (Exception | Error e) {
                    handlerErrors.increment();
                    reportOnce("handler", e);
                } finally {
                    backlogLowered(backlogBytes.addAndGet(-held));
                }
            });
        } catch (RejectedExecutionException e) {
            backlogBytes.addAndGet(-held);
            LOG.debug("sender loop stopped; dropping a side-channel message");
        }
    }

    private boolean reply(byte[] identity, byte[] payload) {
        Objects.requireNonNull(payload, "payload");
        if (!running) {
            repliesDropped.increment();
            return false;
        }
        replies.add(new Reply(identity, payload));
        wake();
        return true;
    }

    private void wake() {
        if (wakePending.compareAndSet(false, true)) {
            try {
                wakePipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
            } catch (ClosedChannelException e) {
                if (!closed.get()) {
                    reportOnce("wake-up", e);
                } else {
                    // a reply from a transfer thread that passed reply()'s running check as close() ran
                    LOG.debug("wake-up after close: the listener has stopped");
                }
            } catch (IOException e) {
                // broken: the bounded poll still picks the work up
                reportOnce("wake-up", e);
            }
        }
    }

    /**
     * What JeroMQ's pollers (its I/O thread and its reaper) report: an exception they survived. While
     * close() tears the ROUTER and the context down they can meet a channel or selector the teardown closed
     * already (read from JeroMQ 0.6.0's code, not reproduced here): a mailbox read on a closed pipe
     * ({@code Signaler.recv} turns the {@link ClosedChannelException} into a {@code ZError.IOException}),
     * and {@code Ctx.destroy}, which closes every selector of the context, the reaper's among them, before
     * it waits for the reaper's thread ({@link ClosedSelectorException}, {@link CancelledKeyException}).
     * Once close() has begun those are the orderly end of the side channel, logged at DEBUG; anything else,
     * or at any other time, is reported as an error.
     */
    void jeromqNotification(Thread t, Throwable e) {
        Throwable c = e instanceof zmq.ZError.IOException && e.getCause() != null ? e.getCause() : e;
        if (closed.get() && (c instanceof ClosedSelectorException || c instanceof ClosedChannelException
                || c instanceof CancelledKeyException)) {
            LOG.debug("JeroMQ thread {} met a closed channel or selector while the side channel closed: {}",
                    t == null ? "?" : t.getName(), e.toString());
            return;
        }
        reportOnce("JeroMQ I/O", e);
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

    /** Stops both threads, closes the socket (on its thread), the pipe and the context. Idempotent. */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        running = false;
        wake();
        boolean listenerStopped = join(thread);
        senderLoop.shutdown();
        try {
            if (!senderLoop.awaitTermination(JOIN_MS, TimeUnit.MILLISECONDS)) {
                senderLoop.shutdownNow();
                if (!senderLoop.awaitTermination(JOIN_MS, TimeUnit.MILLISECONDS)) {
                    LOG.error("mooncake-p-sender-0 did not stop within {} ms (a handler is blocked)", 2 * JOIN_MS);
                }
            }
            // a terminated executor's thread may still be exiting: close() returns after it is gone
            if (senderLoop.isTerminated() && !join(senderThread.get())) {
                LOG.error("mooncake-p-sender-0 did not exit within {} ms", JOIN_MS);
            }
        } catch (InterruptedException e) {
            senderLoop.shutdownNow();
            Thread.currentThread().interrupt();
        }
        closePipe();
        if (ioThreadDied) {
            LOG.warn("a JeroMQ I/O thread of {} died earlier; its ZMQ context is left open (it cannot terminate)",
                    thread.getName());
        } else if (listenerStopped) {
            context.close();
        } else {
            LOG.error(String.format(Locale.ROOT, "%s did not stop within %d ms; its ZMQ context is left open",
                    thread.getName(), JOIN_MS));
        }
    }

    private static boolean join(Thread t) {
        try {
            t.join(JOIN_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return !t.isAlive();
    }

    private void closePipe() {
        try {
            wakePipe.sink().close();
        } catch (IOException e) {
            LOG.debug("closing the wake-up pipe sink", e);
        }
        try {
            wakePipe.source().close();
        } catch (IOException e) {
            LOG.debug("closing the wake-up pipe source", e);
        }
    }
}
