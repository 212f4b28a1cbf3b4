package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.BufferRegistry.Buffer;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One persistent connection to a peer's data port, driven by two threads:
 *
 * <ul>
 *   <li>the <b>sender</b> ({@code mooncake-initiator-send-P-L}) claims tasks from the {@link Peer},
 *       writes each 24-byte header and, for a WRITE, the body straight from registered memory
 *       (see below), and appends the request to the in-flight ring;</li>
 *   <li>the <b>receiver</b> ({@code mooncake-initiator-recv-P-L}) consumes the ring in order: the
 *       v2 status frame of each request and, for a READ, the body into registered memory (small
 *       bodies through a 64 KiB receive buffer that also picks up the following frames, large
 *       remainders straight from the socket), then completes the task.</li>
 * </ul>
 *
 * <p>Bodies up to {@value #STAGE_LIMIT} bytes are copied behind their header in the stage, so that
 * several queued requests leave in one {@code write}. Larger ones below {@value #GATHER_BYTES}
 * bytes, with gathering writes ({@link GatherWriter}, the default where the JVM allows it), stay
 * in place: the runs of staged headers and the bodies are queued as pieces and sent with one
 * {@code sendmsg} per {@value #GATHER_BYTES} bytes of bodies or when nothing more is queued, and
 * the bodies' buffer stays claimed in the slot until they are written. Bodies of
 * {@value #GATHER_BYTES} bytes and more (where one more system call per request costs nothing
 * measurable), and every large body without gathering, go as the header with the first
 * {@value #STAGE_LIMIT} bytes, then the rest straight from registered memory. The ring is
 * single-producer (sender) /
 * single-consumer (receiver) with park/unpark hand-off, so steady-state transfers allocate
 * nothing per descriptor.
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
    /** Why a task failed on a lane whose connection broke or could not carry it. */
    private static final String LOST = "connection lost";
    private static final int CONNECT_TIMEOUT_MS = 5_000;
    /** Receive buffer: status frames and small read bodies of pipelined requests arrive in one read. */
    private static final int IN_BUFFER = 64 * 1024;
    /** Bodies up to this size travel in the same write as their header (copied). */
    static final int STAGE_LIMIT = 16 * 1024;
    /** Send staging buffer: several small requests queued at once leave in one write. */
    private static final int STAGE_BYTES = 64 * 1024;
    /** Safety net for park/unpark hand-offs: a parked thread re-checks at least this often. */
    private static final long PARK_NANOS = 10_000_000L;
    /** Gathering writes: body bytes queued before the pieces are sent; larger bodies are not gathered. */
    static final long GATHER_BYTES = 512 * 1024;

    private final Peer peer;
    private final String name;
    private final LocalMemory.Slot slot;
    private final Thread sender;
    private final Thread receiver;

    // single-producer (sender) / single-consumer (receiver) ring of in-flight requests
    private final int capacity;
    private final BatchTasks[] ringBatch;
    private final int[] ringTask;
    private final byte[] ringOp;
    private final long[] ringDeadline;
    /** Next sequence the receiver consumes; written by the receiver only. */
    private volatile long head;
    /** Next sequence the sender fills; written by the sender only. */
    private volatile long tail;
    private volatile Thread senderParked;
    private volatile Thread receiverParked;

    private final Object channelLock = new Object();
    private volatile SocketChannel channel;
    private volatile boolean stopped;
    /** Task index handed over by {@link Peer#claim}; sender thread only. */
    int claimed;
    /** Set by {@link Peer#claim} (under the peer's lock) when it hands over a task, cleared by the sender when staged. */
    volatile boolean busy;
    /** v1 writes staged but not yet written (complete once written); sender thread only. */
    private final BatchTasks[] v1Batch;
    private final int[] v1Task;
    private int v1Count;
    private volatile BatchTasks sendBatch;
    private volatile BatchTasks recvBatch;
    /** Bounce buffers for GPU memory, created on first use; owned by the sender / receiver thread. */
    private Stager sendStager;
    private Stager recvStager;
    /** Deadline of the status frame the receiver waits for, 0 when not waiting. */
    private volatile long statusDeadline;
    // gathering writes (sender thread only): headers in the stage and bodies in place, one sendmsg
    private GatherWriter gather;
    private long stageAddress;
    /** Start of the stage bytes not yet queued as a piece. */
    private int segStart;
    /** The buffer of the queued bodies, claimed in slot position 0 until they are written; null when none. */
    private Buffer gatherBuf;
    /** Whether sendOne holds slot position 0 for its own request. */
    private boolean inRequest;

    Lane(Peer peer, String name) {
        this.peer = peer;
        this.name = name;
        capacity = peer.config.window();
        ringBatch = new BatchTasks[capacity];
        ringTask = new int[capacity];
        ringOp = new byte[capacity];
        ringDeadline = new long[capacity];
        v1Batch = new BatchTasks[capacity];
        v1Task = new int[capacity];
        slot = peer.memory.slot(() -> kill("registered buffer unregistered while in use"));
        sender = Thread.ofPlatform().daemon(true).name("mooncake-initiator-send-" + name).unstarted(this::sendLoop);
        receiver = Thread.ofPlatform().daemon(true).name("mooncake-initiator-recv-" + name).unstarted(this::recvLoop);
    }

    void start() {
        sender.start();
        receiver.start();
    }

    private int index(long seq) {
        return (int) (seq % capacity);
    }

    private void wakeSender() {
        Thread t = senderParked;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    private void wakeReceiver() {
        Thread t = receiverParked;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    // ------------------------------------------------------------------ sender

    private void sendLoop() {
        LocalMemory.Views views = new LocalMemory.Views(peer.memory);
        ByteBuffer stage = ByteBuffer.allocateDirect(STAGE_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        MemorySegment stageSegment = MemorySegment.ofBuffer(stage);
        stageAddress = stageSegment.address();
        if (peer.config.gatherWrites() && GatherWriter.unavailableReason() == null) {
            gather = new GatherWriter();
        }
        try {
            while (!stopped) {
                BatchTasks b;
                try {
                    b = peer.claim(this);
                } catch (InterruptedException e) {
                    break;
                }
                if (b == null) {
                    break;
                }
                SocketChannel ch = connected();
                stage.clear();
                boolean healthy = ch != null;
                // stage this task and whatever else is queued right now, up to the stage size
                while (true) {
                    int i = claimed;
                    sendBatch = b;
                    try {
                        if (!healthy) {
                            b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, "lane unhealthy");
                        } else if (!b.aborted() && !b.isTerminal(i)) {
                            healthy = sendOne(ch, b, i, views, stage, stageSegment);
                        }
                    } finally {
                        sendBatch = null;
                    }
                    if (!healthy || stage.position() > STAGE_BYTES - TcpWire.HEADER_BYTES - 1024
                            || v1Count == capacity || (gather != null && gather.pending() >= GATHER_BYTES)
                            || (b = peer.tryClaim(this)) == null) {
                        break;
                    }
                }
                if (healthy) {
                    flush(ch, stage);
                } else {
                    dropGathered(stage);
                }
                failUnsentV1();
                busy = false;
                peer.touch();
            }
        } catch (RuntimeException | Error e) {
            LOG.error("lane {} sender died", name, e);
            peer.fail("lane sender failed: " + e);
            throw e;
        } finally {
            slot.exit(0);
            if (gather != null) {
                gather.close();
                gather = null;
            }
            peer.memory.staging.disown(sendStager);
            sendStager = null;
        }
    }

    /** Forgets queued pieces (the connection failed; their tasks fail with it) and releases their buffer. */
    private void dropGathered(ByteBuffer stage) {
        if (gather != null && !gather.isEmpty()) {
            gather.clear();
            stage.clear();
        }
        segStart = 0;
        releaseGathered();
    }

    /** The queued bodies were written or dropped: their buffer's claim goes unless sendOne still holds it. */
    private void releaseGathered() {
        if (gatherBuf != null) {
            gatherBuf = null;
            if (!inRequest) {
                slot.exit(0);
            }
        }
    }

    /** Whether gathering writes can be used on {@code ch} (binding the writer to it when needed). */
    private boolean gatherOn(SocketChannel ch) {
        return gather != null && gather.use(ch, name);
    }

    private void failUnsentV1() {
        for (int k = 0; k < v1Count; k++) {
            v1Batch[k].fail(v1Task[k], TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
            v1Batch[k] = null;
        }
        v1Count = 0;
    }

    /**
     * Writes the staged requests; v1 writes among them are complete once written (no ack in v1).
     * False when the connection failed (staged v1 writes stay pending, for the caller to fail).
     */
    private boolean flush(SocketChannel ch, ByteBuffer stage) {
        if (gather != null && !gather.isEmpty()) {
            gather.add(stageAddress + segStart, stage.position() - segStart);
            try {
                while (!gather.isEmpty()) {
                    gather.writeOnce(); // blocking socket: all of it, or 0 after an interrupted call
                }
            } catch (IOException e) {
                dropGathered(stage);
                kill("send failed: " + e.getMessage());
                return false;
            }
            stage.clear();
            segStart = 0;
            releaseGathered();
            completeV1Written();
            return true;
        }
        if (stage.position() == 0) {
            return true;
        }
        stage.flip();
        try {
            while (stage.hasRemaining()) {
                ch.write(stage);
            }
        } catch (IOException e) {
            kill("send failed: " + e.getMessage());
            return false;
        } finally {
            stage.clear();
        }
        completeV1Written();
        return true;
    }

    private void completeV1Written() {
        for (int k = 0; k < v1Count; k++) {
            v1Batch[k].complete(v1Task[k]);
            v1Batch[k] = null;
        }
        v1Count = 0;
    }

    /** Stages (or, for large WRITE bodies, sends) one request; false when the connection failed (task failed). */
    private boolean sendOne(SocketChannel ch, BatchTasks b, int i, LocalMemory.Views views, ByteBuffer stage,
            MemorySegment stageSegment) {
        boolean v2 = peer.v2();
        int op = b.isWrite(i) ? TcpWire.OP_WRITE : TcpWire.OP_READ;
        long len = b.length(i);
        long local = b.local(i);
        int opcode = op | (v2 ? TcpWire.V2_FLAG : 0);
        boolean write = op == TcpWire.OP_WRITE;
        int staged = TcpWire.HEADER_BYTES + (write ? (int) Math.min(len, STAGE_LIMIT) : 0);
        if (stage.remaining() < staged || tail - head >= capacity || (gather != null && !gather.hasRoom(3))) {
            // make room; the target must see the staged requests before the ring can drain
            if (!flush(ch, stage) || !awaitSpace(ch)) {
                b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                return false;
            }
        }
        Buffer lb = null;
        int dev = -1;
        if (write) {
            lb = peer.memory.registry.find(local, len);
            // queued bodies of another buffer go first: slot position 0 holds one buffer
            if (lb != null && gatherBuf != null && lb != gatherBuf && !flush(ch, stage)) {
                b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                return false;
            }
            if (lb == null || (lb != gatherBuf && !slot.enter(0, lb))) {
                b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                return true;
            }
            dev = DeviceStaging.deviceOf(lb);
            if (dev >= 0 && sendStager() == null) {
                slot.exit(0);
                b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                return true;
            }
        }
        inRequest = lb != null;
        try {
            int at = stage.position();
            TcpWire.putHeader(stage, len, b.remote(i), opcode, peer.ownTag);
            stage.position(at + TcpWire.HEADER_BYTES);
            if (!write) {
                push(b, i, opcode);
                return true;
            }
            if (dev >= 0) { // GPU memory: the header goes now, the body through the bounce buffers
                if (!flush(ch, stage)) {
                    b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                    return false;
                }
                int rc = sendStager.send(ch, dev, local, len);
                if (rc != Stager.OK) {
                    b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                    kill(String.format(Locale.ROOT, "GPU copy for a write of %d bytes from 0x%x failed (%d)", len,
                            local, rc));
                    return false;
                }
                return afterBody(b, i, opcode, v2, stage);
            }
            if (len > STAGE_LIMIT && len < GATHER_BYTES && gatherOn(ch)) { // queued; written by flush
                gather.add(stageAddress + segStart, stage.position() - segStart);
                segStart = stage.position();
                gather.add(local, len);
                gatherBuf = lb;
                return afterBody(b, i, opcode, v2, stage);
            }
            int first = (int) Math.min(len, STAGE_LIMIT);
            MemorySegment.copy(LocalMemory.ALL, local, stageSegment, stage.position(), first);
            stage.position(stage.position() + first);
            if (first < len) { // large body: send what is staged, then the rest straight from memory
                if (!flush(ch, stage)) {
                    b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
                    return false;
                }
                long done = first;
                while (done < len) {
                    ByteBuffer body = views.view(lb, local + done, len - done);
                    int n = body.remaining();
                    while (body.hasRemaining()) {
                        ch.write(body);
                    }
                    done += n;
                }
            }
        } catch (IOException e) {
            b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
            kill("send failed: " + e.getMessage());
            return false;
        } finally {
            if (lb != null) {
                inRequest = false;
                if (gatherBuf == null) {
                    slot.exit(0);
                }
            }
        }
        return afterBody(b, i, opcode, v2, stage);
    }

    /** After a WRITE body was staged or sent: v2 waits for the status, v1 completes once written. */
    private boolean afterBody(BatchTasks b, int i, int opcode, boolean v2, ByteBuffer stage) {
        if (v2) {
            push(b, i, opcode);
        } else if (stage.position() == 0) {
            b.complete(i); // large v1 write: already on the wire
        } else {
            v1Batch[v1Count] = b;
            v1Task[v1Count] = i;
            v1Count++;
        }
        return true;
    }

    /** The sender's stager, created on its first GPU request; null (logged) when bounce buffers cannot be had. */
    private Stager sendStager() {
        if (sendStager == null) {
            try {
                sendStager = peer.memory.staging.own();
            } catch (RuntimeException e) {
                peer.memory.staging.copyFailed("allocating bounce buffers for lane " + name + ": " + e.getMessage());
            }
        }
        return sendStager;
    }

    /** The receiver's stager, created on its first GPU request; null (logged) when bounce buffers cannot be had. */
    private Stager recvStager() {
        if (recvStager == null) {
            try {
                recvStager = peer.memory.staging.own();
            } catch (RuntimeException e) {
                peer.memory.staging.copyFailed("allocating bounce buffers for lane " + name + ": " + e.getMessage());
            }
        }
        return recvStager;
    }

    /** The open connection, connecting when there is none (after the ring drained); null on failure. */
    private SocketChannel connected() {
        SocketChannel ch = channel;
        if (ch != null) {
            return ch;
        }
        while (head != tail && !stopped) {
            senderParked = Thread.currentThread();
            if (head != tail && !stopped) {
                LockSupport.parkNanos(this, PARK_NANOS);
            }
            senderParked = null;
        }
        if (stopped) {
            return null;
        }
        InetSocketAddress target = new InetSocketAddress(peer.dataAddress.getHostString(), peer.dataAddress.getPort());
        if (Peer.isOwnDataEndpoint(target, peer.ownDataPort)) {
            // the peer's name resolves to this engine now (DNS changed since the segment was opened): a
            // connection would write into our own memory
            peer.segment.foundOwnEngine();
            peer.fail(String.format(Locale.ROOT, "data address %s of %s is this engine's own data port; refused",
                    target, peer.descriptor.name()));
            return null;
        }
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
        synchronized (channelLock) {
            if (stopped) {
                closeQuietly(c);
                return null;
            }
            channel = c;
        }
        LOG.debug("lane {} connected to {}", name, target);
        return c;
    }

    private boolean awaitSpace(SocketChannel ch) {
        while (tail - head >= capacity && channel == ch && !stopped) {
            senderParked = Thread.currentThread();
            if (tail - head >= capacity && channel == ch && !stopped) {
                LockSupport.parkNanos(this, PARK_NANOS);
            }
            senderParked = null;
        }
        return channel == ch && !stopped;
    }

    private void push(BatchTasks b, int i, int op) {
        long t = tail;
        int k = index(t);
        ringBatch[k] = b;
        ringTask[k] = i;
        ringOp[k] = (byte) op;
        ringDeadline[k] = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(peer.config.statusTimeoutMs());
        tail = t + 1; // publishes the slot
        wakeReceiver();
    }

    // ------------------------------------------------------------------ receiver

    private void recvLoop() {
        LocalMemory.Views views = new LocalMemory.Views(peer.memory);
        ByteBuffer status = ByteBuffer.allocateDirect(IN_BUFFER).order(ByteOrder.LITTLE_ENDIAN);
        MemorySegment inSegment = MemorySegment.ofBuffer(status);
        status.flip();
        try {
            while (true) {
                long h = head;
                while (tail == h && !stopped) {
                    receiverParked = Thread.currentThread();
                    if (tail == h && !stopped) {
                        LockSupport.parkNanos(this, PARK_NANOS);
                    }
                    receiverParked = null;
                }
                long t = tail;
                if (t == h) {
                    return; // stopped and nothing in flight
                }
                int k = index(h);
                BatchTasks b = ringBatch[k];
                int i = ringTask[k];
                int op = ringOp[k];
                long deadline = ringDeadline[k];
                SocketChannel ch = channel;
                recvBatch = b;
                boolean ok;
                try {
                    ok = !b.aborted() && ch != null && receiveOne(ch, b, i, op, deadline, status, inSegment, views);
                } finally {
                    recvBatch = null;
                }
                if (ok) {
                    b.complete(i);
                } else {
                    b.fail(i, TcpTransport.NAME, SliceFailure.TRANSIENT, "no good reply");
                }
                if (ok) {
                    ringBatch[k] = null;
                    head = h + 1;
                    wakeSender();
                } else {
                    kill(null);
                    drain(status);
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.error("lane {} receiver died", name, e);
            peer.fail("lane receiver failed: " + e);
            drain(status);
            throw e;
        } finally {
            slot.exit(1);
            peer.memory.staging.disown(recvStager);
            recvStager = null;
        }
    }

    private boolean receiveOne(SocketChannel ch, BatchTasks b, int i, int op, long deadline, ByteBuffer in,
            MemorySegment inSegment, LocalMemory.Views views) {
        try {
            if ((op & TcpWire.V2_FLAG) != 0) {
                if (in.remaining() < TcpWire.STATUS_BYTES) {
                    statusDeadline = deadline;
                    try {
                        // before a large read body take just the status, so the body goes straight to memory
                        boolean largeRead = (op & 0x7f) == TcpWire.OP_READ
                                && b.length(i) >= TcpDataServer.DIRECT_THRESHOLD;
                        if (!fill(ch, in, TcpWire.STATUS_BYTES,
                                largeRead ? TcpWire.STATUS_BYTES : in.capacity())) {
                            throw new IOException("peer closed the connection before the status frame");
                        }
                    } finally {
                        statusDeadline = 0;
                    }
                }
                long frame = in.getLong();
                if (!TcpWire.validStatus(frame)) {
                    kill(String.format(Locale.ROOT, "invalid status frame 0x%016x (legacy peer?)", frame));
                    return false;
                }
                if (frame == TcpWire.STATUS_SELF) {
                    // the data server that answered is this engine's own: refused there, nothing moved
                    peer.segment.foundOwnEngine();
                    peer.fail(String.format(Locale.ROOT, "data address %s of %s leads to this engine's own data "
                            + "server (a port-forward or NAT): refused there, nothing written", peer.dataAddress,
                            peer.descriptor.name()));
                    return false;
                }
                if (frame != TcpWire.STATUS_OK) {
                    LOG.warn("lane {}: target {} rejected {} of {} bytes at 0x{} (status {})", name,
                            peer.descriptor.name(), (op & 0x7f) == TcpWire.OP_WRITE ? "write" : "read",
                            b.length(i), Long.toHexString(b.remote(i)), frame & 0xffffffffL);
                    return false;
                }
            }
            if ((op & 0x7f) == TcpWire.OP_WRITE) {
                return true;
            }
            long len = b.length(i);
            long local = b.local(i);
            Buffer lb = peer.memory.registry.find(local, len);
            if (lb == null || !slot.enter(1, lb)) {
                return false;
            }
            try {
                int dev = DeviceStaging.deviceOf(lb);
                if (dev >= 0) { // GPU memory: through the bounce buffers
                    Stager st = recvStager();
                    int rc = st == null ? Stager.NO_QUEUE : st.receive(ch, in, inSegment, dev, local, len);
                    if (rc != Stager.OK) {
                        kill(rc == Stager.EOF ? "peer closed the connection during a read body" : String.format(
                                Locale.ROOT, "GPU copy for a read of %d bytes into 0x%x failed (%d)", len, local, rc));
                        return false;
                    }
                    return true;
                }
                long done = 0;
                while (done < len) {
                    int avail = in.remaining();
                    if (avail > 0) { // bytes already buffered with earlier frames
                        int n = (int) Math.min(avail, len - done);
                        MemorySegment.copy(inSegment, in.position(), LocalMemory.ALL, local + done, n);
                        in.position(in.position() + n);
                        done += n;
                        continue;
                    }
                    long left = len - done;
                    int r;
                    if (left >= TcpDataServer.DIRECT_THRESHOLD) { // large: straight into registered memory
                        r = ch.read(views.view(lb, local + done, left));
                        if (r > 0) {
                            done += r;
                        }
                    } else { // small: one read may also bring the next frames
                        in.clear();
                        r = ch.read(in);
                        in.flip();
                    }
                    if (r < 0) {
                        kill("peer closed the connection during a read body");
                        return false;
                    }
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

    /** Reads until at least {@code need} bytes are buffered, holding at most {@code max}; false on EOF. */
    private static boolean fill(SocketChannel ch, ByteBuffer in, int need, int max) throws IOException {
        in.compact();
        in.limit(Math.max(need, Math.min(max, in.capacity())));
        try {
            while (in.position() < need) {
                if (ch.read(in) < 0) {
                    return false;
                }
            }
            return true;
        } finally {
            in.flip();
        }
    }

    /** Fails every request in the ring (the connection is gone) and resets the status buffer. */
    private void drain(ByteBuffer status) {
        long t = tail;
        for (long q = head; q < t; q++) {
            int k = index(q);
            ringBatch[k].fail(ringTask[k], TcpTransport.NAME, SliceFailure.TRANSIENT, LOST);
            ringBatch[k] = null;
        }
        head = t;
        status.clear().flip();
        wakeSender();
    }

    // ------------------------------------------------------------------ control

    /** Closes the connection; both threads' blocked I/O fails and the ring drains. */
    void kill(String reason) {
        SocketChannel c;
        synchronized (channelLock) {
            c = channel;
            channel = null;
        }
        if (c != null) {
            if (reason != null) {
                LOG.warn("lane {} to {}: closing connection: {}", name, peer.descriptor.name(), reason);
            }
            shutdownQuietly(c); // ends a gathering write blocked on the sender's duplicate descriptor
            closeQuietly(c);
        }
        wakeSender();
        wakeReceiver();
    }

    /** Whether this lane holds no task: none claimed, none in flight (the caller holds the peer's lock). */
    boolean idle() {
        return !busy && head == tail && sendBatch == null && recvBatch == null;
    }

    /** Whether this lane is sending, receiving or holding in flight a task of {@code b}. */
    boolean touches(BatchTasks b) {
        if (sendBatch == b || recvBatch == b) {
            return true;
        }
        long t = tail;
        for (long q = head; q < t; q++) {
            if (ringBatch[index(q)] == b) {
                return true;
            }
        }
        return false;
    }

    /** Waits until neither thread works on {@code b}. */
    void awaitNotUsing(BatchTasks b, long deadlineNanos) {
        while ((sendBatch == b || recvBatch == b) && System.nanoTime() < deadlineNanos) {
            LockSupport.parkNanos(50_000);
        }
        if (sendBatch == b || recvBatch == b) {
            LOG.error("lane {} still works on aborted batch {}", name, b.id());
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

    private static void shutdownQuietly(SocketChannel c) {
        try {
            c.shutdownInput();
            c.shutdownOutput();
        } catch (IOException | RuntimeException e) { // not connected, already closed
            LOG.debug("shutdown: {}", e.toString());
        }
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
