package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry.Buffer;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection of the {@link TcpDataServer} (Mooncake {@code ServerSession}): its request loop
 * (header, validation, WRITE body into registered memory, READ body out of it, GPU staging), the
 * hand-off between its busy phase on a pooled platform thread and the server's idle selector, and
 * its end. The server owns the set of sessions, the idle selector, the buffer pool and the caps;
 * a session reaches them through {@link #server}. Owned by one thread at a time: the serving thread
 * while {@link #BUSY}, the idle selector's thread while {@link #IDLE}; {@link #abort()} may be called
 * from any thread (reaper, cap, unregistration, close).
 */
final class DataSession {

    // logged under the server's name, as before this class had its own file
    private static final Logger LOG = LoggerFactory.getLogger(TcpDataServer.class);
    private static final int LINGER_MS = 2000;

    private final TcpDataServer server;
    private final LocalMemory memory;
    final SocketChannel ch;
    final String name;
    final LocalMemory.Slot slot;
    volatile Thread thread;
    /** When a byte last moved or the session last went idle (System.nanoTime). */
    volatile long lastActive = System.nanoTime();
    /** Whether the session waits for a request header with nothing in flight. */
    volatile boolean waitingForHeader;

    DataSession(TcpDataServer server, SocketChannel ch, String name) {
        this.server = server;
        this.memory = server.memory;
        this.views = new LocalMemory.Views(memory);
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

    /** Session states: owned by a serving thread, waiting in the idle selector, or being server.closed from idle. */
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
        server.toRegister.add(this);
        server.idleSelector.wakeup();
    }

    /** Busy phase, on a pooled platform thread: serves requests until EOF or a pause past the grace period. */
    void busyPhase() {
        thread = Thread.currentThread();
        boolean handedOff = false;
        try {
            if (peer == null) {
                peer = String.valueOf(ch.getRemoteAddress());
            }
            handedOff = serve();
        } catch (IOException e) {
            if (!server.closed) {
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
        server.sessions.remove(this);
    }

    final LocalMemory.Views views;
    private String peer;
    private TcpDataServer.IoBuffers io;
    /** The selector this session's thread waits in (its buffers' one), for {@link #abort()} to wake. */
    private volatile java.nio.channels.Selector waitingIn;
    /** This session's key in {@code io.selector}, null when not registered there. */
    private java.nio.channels.SelectionKey key;

    /** Returns the buffers to the pool, first taking this channel out of their selector. */
    private void releaseIo() {
        TcpDataServer.IoBuffers b = io;
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
            server.ioPool.add(b);
        }
    }

    /** Cancels this session's key in {@code b}'s selector and flushes it; false when the selector is unusable. */
    private boolean deregister(TcpDataServer.IoBuffers b) {
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
     * Waits up to {@link TcpDataServer#GRACE_MS} on this thread for the next request's first bytes (the common
     * case of a busy lane): true when readable, false when none came.
     */
    private boolean graceWait() throws IOException {
        waitingForHeader = true;
        lastActive = System.nanoTime();
        try {
            return await(java.nio.channels.SelectionKey.OP_READ, TcpDataServer.GRACE_MS);
        } finally {
            waitingForHeader = false;
            lastActive = System.nanoTime();
        }
    }

    /** Serves requests; true when the session paused and was handed to the idle selector, false at its end. */
    private boolean serve() throws IOException {
        io = server.borrowIo();
        segStart = 0;
        boolean lastLarge = false;
        while (!server.closed) {
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
            TcpDataServer.IoBuffers io = this.io;
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
            long tag = TcpWire.tag(in, p);
            in.position(p + TcpWire.HEADER_BYTES);
            boolean v2 = (opcode & TcpWire.V2_FLAG) != 0;
            int op = opcode & 0x7f;
            // a large WRITE's body follows its header: read just the next header, so that body can
            // go straight to memory (after a READ only headers follow: read ahead)
            lastLarge = op == TcpWire.OP_WRITE && Long.compareUnsigned(size, TcpDataServer.DIRECT_THRESHOLD) >= 0;
            if (tag != 0 && tag == server.ownTag) {
                // this engine's own request, come back through a forwarder or NAT: it would move our own memory
                long n = server.selfRefused.incrementAndGet();
                String fmt = "data session with {}: refusing a request from this engine itself (its tag; a port-forward "
                        + "or NAT leads its peer's data address here): opcode 0x{} of {} bytes at 0x{}; closing";
                Object[] args = {peer, Integer.toHexString(opcode), Long.toUnsignedString(size), Long.toHexString(addr)};
                if (n <= TcpDataServer.WARN_LIMIT) {
                    LOG.warn(fmt, args);
                } else {
                    LOG.debug(fmt, args);
                }
                if (v2) {
                    out.putLong(TcpWire.STATUS_SELF);
                }
                flush(out);
                lingerAndDiscard();
                return false;
            }
            Buffer buf = (op == TcpWire.OP_READ || op == TcpWire.OP_WRITE) && TcpWire.validRange(addr, size)
                    ? memory.registry.find(addr, size) : null;
            if (buf != null && gatherBuf != null && buf != gatherBuf) {
                flush(out); // slot position 0 holds one buffer: the queued bodies of another go first
            }
            if (buf == null || (buf != gatherBuf && !slot.enter(0, buf))) {
                long n = server.rejected.incrementAndGet();
                // WARN for the first ones, then DEBUG: a flood of bad requests must not flood the log
                String fmt = "data session with {}: rejecting opcode 0x{} of {} bytes at 0x{}: {}; closing"
                        + (n == TcpDataServer.WARN_LIMIT ? " (further rejections at DEBUG; see rejectedDataRequests())" : "");
                Object[] args = {peer, Integer.toHexString(opcode), Long.toUnsignedString(size),
                    Long.toHexString(addr), op > 1 ? "unknown opcode" : "outside registered memory"};
                if (n <= TcpDataServer.WARN_LIMIT) {
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
                        if (++statusesQueued >= TcpDataServer.STATUS_BATCH || statusBytes >= Lane.GATHER_BYTES) {
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
    private boolean gatherOn(TcpDataServer.IoBuffers b) {
        return b.gather != null && b.gather.use(ch, name);
    }

    /**
     * Serves a request on GPU memory through a pooled stager (waiting for one when all are busy):
     * a WRITE body goes socket → bounce buffer → device, then the v2 status is queued; a READ
     * sends the v2 status, then the body device → bounce buffer → socket. False when the session
     * must end (peer gone, copy failed: the initiator sees the connection close and fails the
     * request).
     */
    private boolean serveDevice(String peer, ByteBuffer in, TcpDataServer.IoBuffers io, ByteBuffer out, int dev, int op,
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
    private boolean receiveBody(String peer, ByteBuffer in, TcpDataServer.IoBuffers io, ByteBuffer out,
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
            if (left >= TcpDataServer.DIRECT_THRESHOLD) {
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

/**
 * After a rejection: half-close and discard what the peer still sends (a WRITE body) until it
 * closes, for at most {@link #LINGER_MS}, so the kernel does not answer unread data with a
 * reset that could destroy the rejection status frame before the peer read it.
 */
private static void lingerAndDiscardOn(SocketChannel ch) {
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
}
