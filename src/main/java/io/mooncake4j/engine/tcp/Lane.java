package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry.Buffer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One persistent connection to a peer's data port, driven by two threads:
 *
 * <ul>
 *   <li>the <b>sender</b> ({@code mooncake-initiator-send-P-L}) claims tasks from the {@link Peer},
 *       writes each 24-byte header and, for a WRITE, the body straight from registered memory
 *       (one gathering write), and appends the request to the in-flight ring;</li>
 *   <li>the <b>receiver</b> ({@code mooncake-initiator-recv-P-L}) consumes the ring in order: the
 *       v2 status frame of each request and, for a READ, the body straight into registered
 *       memory, then completes the task.</li>
 * </ul>
 *
 * <p>Requests are pipelined up to {@link TcpConfig#window()} per lane; the target handles them in
 * order, so the ring order is the reply order. Any failure (I/O error, rejection, bad status
 * frame, status timeout, abort) <i>kills</i> the connection: every request in the ring fails, and
 * the sender reconnects for the next task once the ring is empty. A v1 WRITE completes when its
 * body is written (there is no acknowledgement in v1).
 *
 * <p>Memory safety: each thread claims the registered buffer it touches in a
 * {@link LocalMemory.Slot} and publishes the batch it works on ({@link #touches}), so that
 * unregistration and batch aborts can wait for it or kill the connection.
 */
final class Lane {

    private static final Logger LOG = LoggerFactory.getLogger(Lane.class);
    private static final int CONNECT_TIMEOUT_MS = 5_000;
    private static final int STATUS_BUFFER = 256;

    private final Peer peer;
    private final String name;
    private final LocalMemory.Slot slot;
    private final Thread sender;
    private final Thread receiver;

    // ring of in-flight requests, guarded by lock
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition notFull = lock.newCondition();
    private final Condition notEmpty = lock.newCondition();
    private final Batch[] ringBatch;
    private final int[] ringTask;
    private final byte[] ringOp;
    private final long[] ringDeadline;
    private int head;
    private int count;

    private volatile SocketChannel channel;
    private volatile boolean stopped;
    /** Task index handed over by {@link Peer#claim}; sender thread only. */
    int claimed;
    private volatile Batch sendBatch;
    private volatile Batch recvBatch;
    /** Deadline of the status frame the receiver waits for, 0 when not waiting. */
    private volatile long statusDeadline;

    Lane(Peer peer, String name) {
        this.peer = peer;
        this.name = name;
        int w = peer.config.window();
        ringBatch = new Batch[w];
        ringTask = new int[w];
        ringOp = new byte[w];
        ringDeadline = new long[w];
        slot = peer.memory.slot(() -> kill("registered buffer unregistered while in use"));
        sender = Thread.ofPlatform().daemon(true).name("mooncake-initiator-send-" + name).unstarted(this::sendLoop);
        receiver = Thread.ofPlatform().daemon(true).name("mooncake-initiator-recv-" + name).unstarted(this::recvLoop);
    }

    void start() {
        sender.start();
        receiver.start();
    }

    // ------------------------------------------------------------------ sender

    private void sendLoop() {
        LocalMemory.Views views = new LocalMemory.Views(peer.memory);
        ByteBuffer header = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer[] gather = new ByteBuffer[2];
        gather[0] = header;
        try {
            while (!stopped) {
                Batch b;
                try {
                    b = peer.claim(this);
                } catch (InterruptedException e) {
                    break;
                }
                if (b == null) {
                    break;
                }
                int i = claimed;
                sendBatch = b;
                try {
                    if (b.aborted || b.isTerminal(i)) {
                        continue;
                    }
                    sendOne(b, i, views, header, gather);
                } finally {
                    sendBatch = null;
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.error("lane {} sender died", name, e);
            peer.fail("lane sender failed: " + e);
            throw e;
        } finally {
            slot.exit(0);
        }
    }

    private void sendOne(Batch b, int i, LocalMemory.Views views, ByteBuffer header, ByteBuffer[] gather) {
        SocketChannel ch = connected();
        if (ch == null) {
            b.finish(i, Batch.FAILED);
            return;
        }
        boolean v2 = peer.v2();
        int op = b.opcode[i];
        long len = b.length[i];
        long remote = b.remote[i];
        long local = b.local[i];
        if (!awaitSpace(ch)) {
            b.finish(i, Batch.FAILED);
            return;
        }
        header.clear();
        TcpWire.putHeader(header, len, remote, op | (v2 ? TcpWire.V2_FLAG : 0));
        try {
            if (op == TcpWire.OP_WRITE) {
                Buffer lb = peer.memory.registry.find(local, len);
                if (lb == null || !slot.enter(0, lb)) {
                    b.finish(i, Batch.FAILED);
                    return;
                }
                try {
                    long done = 0;
                    while (done < len) {
                        ByteBuffer body = views.view(lb, local + done, len - done);
                        int n = body.remaining();
                        gather[1] = body;
                        while (body.hasRemaining()) {
                            ch.write(gather, header.hasRemaining() ? 0 : 1, header.hasRemaining() ? 2 : 1);
                        }
                        done += n;
                    }
                } finally {
                    gather[1] = null;
                    slot.exit(0);
                }
                if (v2) {
                    push(b, i, op | TcpWire.V2_FLAG);
                } else {
                    b.finish(i, Batch.COMPLETED);
                }
            } else {
                push(b, i, op | (v2 ? TcpWire.V2_FLAG : 0));
                while (header.hasRemaining()) {
                    ch.write(header);
                }
            }
        } catch (IOException e) {
            b.finish(i, Batch.FAILED);
            kill("send failed: " + e.getMessage());
        }
    }

    /** The open connection, connecting when there is none (after the ring drained); null on failure. */
    private SocketChannel connected() {
        SocketChannel ch = channel;
        if (ch != null) {
            return ch;
        }
        lock.lock();
        try {
            while (count > 0 && !stopped) {
                notFull.awaitUninterruptibly();
            }
        } finally {
            lock.unlock();
        }
        if (stopped) {
            return null;
        }
        InetSocketAddress target = new InetSocketAddress(peer.dataAddress.getHostString(), peer.dataAddress.getPort());
        SocketChannel c = null;
        try {
            c = SocketChannel.open();
            c.setOption(StandardSocketOptions.TCP_NODELAY, true);
            c.socket().connect(target, CONNECT_TIMEOUT_MS);
        } catch (IOException e) {
            closeQuietly(c);
            peer.fail(String.format(Locale.ROOT, "cannot connect to data port %s: %s", target, e));
            return null;
        }
        lock.lock();
        try {
            if (stopped) {
                closeQuietly(c);
                return null;
            }
            channel = c;
        } finally {
            lock.unlock();
        }
        LOG.debug("lane {} connected to {}", name, target);
        return c;
    }

    private boolean awaitSpace(SocketChannel ch) {
        lock.lock();
        try {
            while (count == ringBatch.length && channel == ch && !stopped) {
                notFull.awaitUninterruptibly();
            }
            return channel == ch && !stopped;
        } finally {
            lock.unlock();
        }
    }

    private void push(Batch b, int i, int op) {
        lock.lock();
        try {
            int t = (head + count) % ringBatch.length;
            ringBatch[t] = b;
            ringTask[t] = i;
            ringOp[t] = (byte) op;
            ringDeadline[t] = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(peer.config.statusTimeoutMs());
            count++;
            notEmpty.signal();
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ receiver

    private void recvLoop() {
        LocalMemory.Views views = new LocalMemory.Views(peer.memory);
        ByteBuffer status = ByteBuffer.allocateDirect(STATUS_BUFFER).order(ByteOrder.LITTLE_ENDIAN);
        status.flip();
        try {
            while (true) {
                Batch b;
                int i;
                int op;
                long deadline;
                int writesAhead;
                SocketChannel ch;
                lock.lock();
                try {
                    while (count == 0 && !stopped) {
                        notEmpty.awaitUninterruptibly();
                    }
                    if (count == 0) {
                        return;
                    }
                    b = ringBatch[head];
                    i = ringTask[head];
                    op = ringOp[head];
                    deadline = ringDeadline[head];
                    writesAhead = 0;
                    for (int k = 0; k < count && writesAhead < STATUS_BUFFER / TcpWire.STATUS_BYTES; k++) {
                        if (ringOp[(head + k) % ringOp.length] != (byte) (TcpWire.OP_WRITE | TcpWire.V2_FLAG)) {
                            break;
                        }
                        writesAhead++;
                    }
                    ch = channel;
                } finally {
                    lock.unlock();
                }
                recvBatch = b;
                boolean ok;
                try {
                    ok = !b.aborted && ch != null && receiveOne(ch, b, i, op, deadline, writesAhead, status, views);
                } finally {
                    recvBatch = null;
                }
                b.finish(i, ok ? Batch.COMPLETED : Batch.FAILED);
                if (!ok) {
                    kill(null);
                    drain(status);
                } else {
                    lock.lock();
                    try {
                        ringBatch[head] = null;
                        head = (head + 1) % ringBatch.length;
                        count--;
                        notFull.signalAll();
                    } finally {
                        lock.unlock();
                    }
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.error("lane {} receiver died", name, e);
            peer.fail("lane receiver failed: " + e);
            drain(status);
            throw e;
        } finally {
            slot.exit(1);
        }
    }

    private boolean receiveOne(SocketChannel ch, Batch b, int i, int op, long deadline, int writesAhead,
            ByteBuffer status, LocalMemory.Views views) {
        try {
            if ((op & TcpWire.V2_FLAG) != 0) {
                long frame = readStatus(ch, status, Math.max(1, writesAhead), deadline);
                if (!TcpWire.validStatus(frame)) {
                    kill(String.format(Locale.ROOT, "invalid status frame 0x%016x (legacy peer?)", frame));
                    return false;
                }
                if (frame != TcpWire.STATUS_OK) {
                    LOG.warn("lane {}: target {} rejected {} of {} bytes at 0x{} (status {})", name,
                            peer.descriptor.name(), (op & 0x7f) == TcpWire.OP_WRITE ? "write" : "read",
                            b.length[i], Long.toHexString(b.remote[i]), frame & 0xffffffffL);
                    return false;
                }
            }
            if ((op & 0x7f) == TcpWire.OP_WRITE) {
                return true;
            }
            long len = b.length[i];
            long local = b.local[i];
            Buffer lb = peer.memory.registry.find(local, len);
            if (lb == null || !slot.enter(1, lb)) {
                return false;
            }
            try {
                long done = 0;
                while (done < len) {
                    ByteBuffer body = views.view(lb, local + done, len - done);
                    int n = body.remaining();
                    while (body.hasRemaining()) {
                        if (ch.read(body) < 0) {
                            kill("peer closed the connection during a read body");
                            return false;
                        }
                    }
                    done += n;
                }
            } finally {
                slot.exit(1);
            }
            return true;
        } catch (IOException e) {
            if (!stopped) {
                kill("receive failed: " + e.getMessage());
            }
            return false;
        }
    }

    /** Reads the next status frame, buffering up to {@code frames} frames known to be due before any body. */
    private long readStatus(SocketChannel ch, ByteBuffer status, int frames, long deadline) throws IOException {
        if (status.remaining() < TcpWire.STATUS_BYTES) {
            status.compact();
            int want = frames * TcpWire.STATUS_BYTES;
            status.limit(Math.min(status.capacity(), want));
            statusDeadline = deadline;
            try {
                while (status.position() < TcpWire.STATUS_BYTES) {
                    if (ch.read(status) < 0) {
                        throw new IOException("peer closed the connection before the status frame");
                    }
                }
            } finally {
                statusDeadline = 0;
            }
            status.flip();
        }
        return status.getLong();
    }

    /** Fails every request in the ring (the connection is gone) and resets the status buffer. */
    private void drain(ByteBuffer status) {
        lock.lock();
        try {
            while (count > 0) {
                Batch b = ringBatch[head];
                b.finish(ringTask[head], Batch.FAILED);
                ringBatch[head] = null;
                head = (head + 1) % ringBatch.length;
                count--;
            }
            notFull.signalAll();
        } finally {
            lock.unlock();
        }
        status.clear().flip();
    }

    // ------------------------------------------------------------------ control

    /** Closes the connection; both threads' blocked I/O fails and the ring drains. */
    void kill(String reason) {
        SocketChannel c;
        lock.lock();
        try {
            c = channel;
            channel = null;
            notFull.signalAll();
        } finally {
            lock.unlock();
        }
        if (c != null) {
            if (reason != null) {
                LOG.warn("lane {} to {}: closing connection: {}", name, peer.descriptor.name(), reason);
            }
            closeQuietly(c);
        }
    }

    /** Whether this lane is sending, receiving or holding in flight a task of {@code b}. */
    boolean touches(Batch b) {
        if (sendBatch == b || recvBatch == b) {
            return true;
        }
        lock.lock();
        try {
            for (int k = 0; k < count; k++) {
                if (ringBatch[(head + k) % ringBatch.length] == b) {
                    return true;
                }
            }
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** Waits until neither thread works on {@code b}. */
    void awaitNotUsing(Batch b, long deadlineNanos) {
        while ((sendBatch == b || recvBatch == b) && System.nanoTime() < deadlineNanos) {
            LockSupport.parkNanos(50_000);
        }
        if (sendBatch == b || recvBatch == b) {
            LOG.error("lane {} still works on aborted batch {}", name, b.id);
        }
    }

    void checkDeadline(long now) {
        long d = statusDeadline;
        if (d != 0 && now - d > 0) {
            kill(String.format(Locale.ROOT, "no status frame within %d ms (MC_TCP_STATUS_TIMEOUT_SEC)",
                    peer.config.statusTimeoutMs()));
        }
    }

    /** Stops both threads: closes the connection and wakes them. */
    void stop() {
        stopped = true;
        kill(null);
        lock.lock();
        try {
            notEmpty.signalAll();
            notFull.signalAll();
        } finally {
            lock.unlock();
        }
    }

    void join() {
        for (Thread t : new Thread[] {sender, receiver}) {
            try {
                if (!t.join(Duration.ofSeconds(10))) {
                    LOG.error("thread {} did not stop within 10 s", t.getName());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        slot.close();
    }

    private static void closeQuietly(SocketChannel c) {
        if (c != null) {
            try {
                c.close();
            } catch (IOException e) {
                LOG.debug("close: {}", e.getMessage());
            }
        }
    }
}
