package io.mooncake4j.connector.worker;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.ZMQ;

/**
 * What a side-channel loop waits on instead of JeroMQ's {@code ZMQ.Poller} (issue 13): its ZMQ
 * sockets (through each socket's mailbox channel, {@code getFD()}) and plain channels (the loop's
 * wake-up pipe), registered once with one {@link Selector}.
 *
 * <p><b>Why not {@code ZMQ.Poller}.</b> JeroMQ 0.6.0 signals a socket's mailbox by writing a byte to
 * a pipe and only then counting it ({@code Signaler.send}: write, then {@code wcursor++}); a
 * non-blocking read of the mailbox ({@code ZMQ_EVENTS}, {@code recv(DONTWAIT)}) takes the byte
 * only once it was counted. The pipe write wakes the loop thread, and on a busy machine the woken
 * loop often takes the writer's core at that very moment (the writer, a JeroMQ I/O thread, is
 * preempted as its write returns, before it counts). {@code ZMQ.poll} then returns at once from
 * every select (the byte is there) and finds no event (it is not counted), and loops like that
 * until its timeout or until the writer runs again: a core spinning for a whole scheduler tick
 * (4 ms at 250 Hz) while the writer and, behind them, every other thread of the path wait. Measured
 * with {@code FinishLatencyProbe -Dprobe.schedstat=true}: the slow samples' extra time was the
 * embedder or an I/O thread waiting on a run queue while {@code mooncake-d-io-0} ran for 3.9 ms
 * ({@code docs/performance.md}). Here a readable mailbox without a message makes the loop yield
 * its core, and after two such passes park for {@link #BACKOFF_NS}, so the writer gets to count
 * its byte. {@code ZMQ.poll} also re-registered every socket with its selector and asked every
 * socket for its events on each call; here a socket is registered once and only the selected ones
 * are asked.
 *
 * <p>A socket's mailbox only signals changes: the loops read every socket until it is empty (or
 * bound the wait, as before), exactly as with {@code ZMQ.Poller}.
 *
 * <p>Thread: the one loop thread that owns the sockets (like the sockets themselves, not thread-safe).
 */
final class SocketWaiter implements AutoCloseable {

    /** How long a loop parks after two yields on a readable mailbox without a message. */
    static final long BACKOFF_NS = TimeUnit.MICROSECONDS.toNanos(20);
    private static final int YIELDS_BEFORE_PARK = 2;

    private final Selector selector;
    private final Map<ZMQ.Socket, SelectionKey> sockets = new IdentityHashMap<>();
    private long emptyWakeUps; // loop thread

    SocketWaiter() {
        try {
            selector = Selector.open();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open a selector for a side-channel loop", e);
        }
    }

    /** Watches {@code socket} for messages (a socket registered twice is watched once). */
    void register(ZMQ.Socket socket) {
        if (sockets.containsKey(socket)) {
            return;
        }
        try {
            sockets.put(socket, socket.getFD().register(selector, SelectionKey.OP_READ, socket));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot watch a ZMQ socket", e);
        }
    }

    /** Watches a plain channel (non-blocking) for readability. */
    void register(SelectableChannel channel) {
        try {
            channel.register(selector, SelectionKey.OP_READ);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot watch a channel", e);
        }
    }

    /** Stops watching {@code socket}; call before closing it. */
    void unregister(ZMQ.Socket socket) {
        SelectionKey key = sockets.remove(socket);
        if (key != null) {
            key.cancel();
        }
    }

    /**
     * Returns when a watched socket may have a message or a watched channel is readable, or after
     * about {@code timeoutMs} (0: do not wait). May return early; the caller reads everything
     * anyway.
     *
     * @throws org.zeromq.ZMQException from a socket whose context was terminated ({@code ETERM})
     */
    void await(long timeoutMs) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        int empty = 0;
        while (true) {
            int n;
            if (timeoutMs <= 0) {
                n = selector.selectNow();
            } else {
                long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (leftMs <= 0) {
                    return;
                }
                n = selector.select(leftMs);
            }
            if (n == 0) {
                return; // timed out (or a wakeup())
            }
            Set<SelectionKey> selected = selector.selectedKeys();
            boolean ready = false;
            for (SelectionKey key : selected) {
                // ZMQ_EVENTS processes the socket's pending commands: a command without a message
                // (a pipe activated for writing, say) takes the mailbox's byte, and the next select blocks
                if (!(key.attachment() instanceof ZMQ.Socket s) || !key.isValid()
                        || (s.getEvents() & ZMQ.Poller.POLLIN) != 0) {
                    ready = true;
                }
            }
            selected.clear();
            if (ready || timeoutMs <= 0) {
                return;
            }
            emptyWakeUps++;
            if (++empty <= YIELDS_BEFORE_PARK) {
                Thread.yield(); // the writer of the byte may be waiting for this very core
            } else {
                LockSupport.parkNanos(BACKOFF_NS);
            }
        }
    }

    /** Passes so far that found only mailboxes without a message (diagnostics; loop thread). */
    long emptyWakeUps() {
        return emptyWakeUps;
    }

    /** Closes the selector (not the sockets or channels). */
    @Override
    public void close() {
        sockets.clear();
        try {
            selector.close();
        } catch (IOException e) {
            throw new UncheckedIOException("closing a side-channel selector", e);
        }
    }
}
