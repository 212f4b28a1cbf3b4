package io.mooncake4j.connector.worker.loop;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.Pipe;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.Iterator;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One thread that owns one NIO {@link Selector} and every channel registered with it: the loop both
 * side-channel ends run their ZMTP connections on (P's ROUTER on {@code mooncake-p-listener-0}, D's
 * DEALERs on {@code mooncake-d-io-0}). Other threads hand it work through their own queues and
 * {@link #wake()}, which writes one byte into a {@link Pipe} registered with the selector (at most one
 * byte per pass, however many wakers).
 *
 * <p>Each pass selects (at most {@link Owner#selectTimeoutMs()}), hands every ready key to
 * {@link Owner#ready}, drains the wake-up pipe, then runs {@link Owner#afterSelect()} (the owner's
 * queued work and timers). An exception in a pass is the owner's to count ({@link Owner#error}); the
 * loop goes on. What escapes a pass (an {@link Error}, an injected fault, a selector that cannot be
 * opened) loses the selector: the owner recovers ({@link Owner#recover}: its channels are closed by
 * then and it reports to the health monitor), and the loop opens a fresh selector and registers the
 * owner's channels again, or stops when the owner cannot recover.
 *
 * <p><b>Threads.</b> Everything of the {@link Owner} but {@link Owner#error} runs on the loop's thread;
 * {@link #wake()}, {@link #injectFault} and {@link #stop()} may be called from any thread.
 */
public final class SelectorLoop {

    private static final Logger LOG = LoggerFactory.getLogger(SelectorLoop.class);
    private static final int READ_BUFFER = 64 * 1024;

    /** What runs on the loop: the side that owns the channels. */
    public interface Owner {
        /** On the loop's thread before the first selector; false when the owner cannot start (the loop ends). */
        boolean start();

        /** Registers the owner's channels on a fresh selector (at the start and after each recovery). */
        void register(Selector selector) throws IOException;

        /** How long the next select may wait, in milliseconds (at least 1). */
        long selectTimeoutMs();

        /** A ready key of one of the owner's channels. */
        void ready(SelectionKey key);

        /** After each select: the work other threads queued, and the owner's timers. */
        void afterSelect() throws IOException;

        /** A failure the loop survived (a pass that threw, a wake-up that failed); any thread. */
        void error(Throwable e);

        /**
         * The selector was lost to {@code cause}: closes what the owner has, reports it; false when the
         * owner cannot go on (the loop ends).
         */
        boolean recover(Throwable cause);

        /** The loop ends (stopping, or an owner that could not start or recover): close everything. */
        void stopped();
    }

    private final Owner owner;
    private final Thread thread;
    private final Pipe wakePipe;
    private final AtomicBoolean wakePending = new AtomicBoolean();
    private final AtomicBoolean stopped = new AtomicBoolean();
    private final ByteBuffer wakeDrain = ByteBuffer.allocate(64); // loop thread only
    private final ByteBuffer readBuffer = ByteBuffer.allocateDirect(READ_BUFFER); // loop thread only
    private volatile boolean running = true;
    private volatile Error injectedFault;

    /** A loop on a new daemon thread called {@code threadName}; {@link #start()} starts it. */
    public SelectorLoop(String threadName, Owner owner) throws IOException {
        this.owner = Objects.requireNonNull(owner, "owner");
        this.wakePipe = Pipe.open();
        try {
            wakePipe.sink().configureBlocking(false);
            wakePipe.source().configureBlocking(false);
        } catch (IOException e) {
            closePipe();
            throw e;
        }
        this.thread = new Thread(this::run, threadName);
        thread.setDaemon(true);
    }

    public void start() {
        thread.start();
    }

    public String threadName() {
        return thread.getName();
    }

    /** False once {@link #stop()} was called. */
    public boolean running() {
        return running;
    }

    public boolean alive() {
        return thread.isAlive();
    }

    /** The loop thread's read buffer, for the owner's connections (loop thread only). */
    public ByteBuffer readBuffer() {
        return readBuffer;
    }

    /** Makes the loop throw {@code fault} on its next pass, as a bug would (tests of the recovery). */
    public void injectFault(Error fault) {
        injectedFault = fault;
        wake();
    }

    /** Makes the loop run a pass soon; any thread. */
    public void wake() {
        if (wakePending.compareAndSet(false, true)) {
            try {
                wakePipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
            } catch (ClosedChannelException e) {
                if (stopped.get()) {
                    LOG.debug("wake-up after stop: {} has stopped", thread.getName());
                } else {
                    owner.error(e);
                }
            } catch (IOException e) {
                owner.error(e); // the bounded select still picks the work up
            }
        }
    }

    private void run() {
        try {
            if (!owner.start()) {
                return;
            }
            while (running) {
                try (Selector selector = Selector.open()) {
                    wakePipe.source().register(selector, SelectionKey.OP_READ);
                    owner.register(selector);
                    passes(selector);
                } catch (RuntimeException | Error | IOException e) {
                    if (!running || !owner.recover(e)) {
                        return;
                    }
                }
            }
        } finally {
            owner.stopped();
        }
    }

    private void passes(Selector selector) throws IOException {
        while (running) {
            Error fault = injectedFault;
            if (fault != null) {
                injectedFault = null;
                throw fault;
            }
            try {
                selector.select(Math.max(1, owner.selectTimeoutMs()));
                Iterator<SelectionKey> it = selector.selectedKeys().iterator();
                while (it.hasNext()) {
                    SelectionKey k = it.next();
                    it.remove();
                    if (k.isValid() && k.channel() != wakePipe.source()) {
                        owner.ready(k);
                    }
                }
                drainWakePipe();
                owner.afterSelect();
            } catch (IOException | RuntimeException e) {
                owner.error(e);
            }
        }
    }

    private void drainWakePipe() {
        wakePending.set(false); // before the owner's queues are read: a later waker writes again
        ByteBuffer buf = wakeDrain;
        buf.clear();
        try {
            while (wakePipe.source().read(buf) > 0) {
                buf.clear();
            }
        } catch (IOException e) {
            owner.error(new IllegalStateException("reading the wake-up pipe failed", e));
        }
    }

    /**
     * Stops the loop and waits up to {@code joinMs} for its thread ({@link Owner#stopped()} has run
     * when it returns true); closes the wake-up pipe. Idempotent.
     */
    public boolean stop(long joinMs) {
        if (stopped.compareAndSet(false, true)) {
            running = false;
            wake();
        }
        if (Thread.currentThread() != thread && thread.isAlive()) {
            try {
                thread.join(joinMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        closePipe();
        return !thread.isAlive();
    }

    private void closePipe() {
        closeQuietly(wakePipe.sink());
        closeQuietly(wakePipe.source());
    }

    private static void closeQuietly(java.nio.channels.Channel c) {
        try {
            c.close();
        } catch (IOException e) {
            LOG.debug("closing the wake-up pipe", e);
        }
    }
}
