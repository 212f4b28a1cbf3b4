package io.mooncake4j.store.wire;

import io.mooncake4j.store.wire.CoroRpcException.Kind;
import java.io.BufferedOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A coro_rpc client over one TCP connection: 20-byte request headers (magic 21, version 0,
 * serialize type 0, msg type 0, seq, function id, body length, attachment length), 16-byte reply
 * headers (magic, version, error code, msg type, seq, body length, attachment length), all
 * little-endian. Calls are pipelined: each is queued to the connection's writer thread and its
 * reply is matched by sequence number by the reader thread, in whatever order replies come. A
 * reply nobody waits for (its call timed out, or a bogus sequence number) is counted and dropped.
 *
 * <p>Every call has a deadline; at most {@code maxInFlight} calls are pending. A broken reply stream
 * (bad magic, a frame over {@code maxFrameBytes}) or a lost connection fails every pending call and
 * drops the connection; the next call connects again. A server that stops answering without closing
 * the connection is caught two ways: a call that times out while the connection delivered no reply
 * at all since the call was sent counts against it, and {@code silentTimeoutsToDrop} such timeouts
 * in a row drop it (its pending calls fail, the next call connects again); and TCP keepalive (idle
 * 10 s, then 5 s probes, 3 of them) ends a connection whose peer is gone. A reply body is read into
 * a buffer that grows as its bytes arrive, so a length field alone never makes the client allocate.
 *
 * <p>{@link #call} never blocks: connecting happens on a thread of its own, and every call arriving
 * meanwhile is queued, in call order, until the connection exists (within its own deadline).
 *
 * <p>Threads: a writer and a reader platform daemon thread per live connection, one timer thread
 * per client, a platform daemon thread per connection attempt. Thread-safe.
 */
public final class CoroRpcClient implements AutoCloseable {

    /**
     * Settings.
     *
     * @param connectTimeout        how long one connection attempt may take
     * @param maxFrameBytes         the largest reply accepted
     * @param maxInFlight           calls pending at once
     * @param silentTimeoutsToDrop  timeouts in a row, with no reply from the connection since each call
     *                              was sent, after which the connection is declared dead and dropped
     */
    public record Options(Duration connectTimeout, int maxFrameBytes, int maxInFlight, int silentTimeoutsToDrop) {

        /** Checks the values. */
        public Options {
            if (silentTimeoutsToDrop < 1 || maxInFlight < 1 || maxFrameBytes < 16) {
                throw new IllegalArgumentException("silentTimeoutsToDrop and maxInFlight must be at least 1, maxFrameBytes 16");
            }
        }

        /**
         * Options that drop a silent connection after 2 timeouts.
         *
         * @param connectTimeout how long one connection attempt may take
         * @param maxFrameBytes  the largest reply accepted
         * @param maxInFlight    calls pending at once
         */
        public Options(Duration connectTimeout, int maxFrameBytes, int maxInFlight) {
            this(connectTimeout, maxFrameBytes, maxInFlight, 2);
        }

        /** {@return defaults: 3 s connect, 64 MiB frames, 4096 calls in flight, dropped after 2 silent timeouts} */
        public static Options defaults() {
            return new Options(Duration.ofSeconds(3), 64 << 20, 4096, 2);
        }
    }

    static final int MAGIC = 21;
    static final int REQ_HEADER = 20;
    static final int RESP_HEADER = 16;
    private static final Logger LOG = LoggerFactory.getLogger(CoroRpcClient.class);
    private static final Frame POISON = new Frame(0, new byte[0]);

    private final InetSocketAddress address;
    private final Options options;
    private final Semaphore inFlight;
    private final ScheduledExecutorService timer;
    private final AtomicInteger seq = new AtomicInteger();
    private final AtomicLong unmatched = new AtomicLong();
    private final AtomicLong protocolErrors = new AtomicLong();
    private final AtomicLong connects = new AtomicLong();
    private final AtomicLong timeouts = new AtomicLong();
    private final AtomicLong silentDrops = new AtomicLong();
    private final Object connectLock = new Object();
    private volatile Connection connection;
    /** Calls waiting for the connection attempt under way, in call order, or null when none is (connectLock). */
    private List<Waiter> waiting;

    private record Waiter(Pending p, byte[] body) {}
    private volatile boolean closed;

    /**
     * A client of the server at {@code address}; nothing connects until the first call.
     *
     * @param address the server
     * @param options limits and timeouts
     */
    public CoroRpcClient(InetSocketAddress address, Options options) {
        this.address = address;
        this.options = options;
        this.inFlight = new Semaphore(options.maxInFlight());
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread th = new Thread(r, "coro-rpc-timer " + address);
            th.setDaemon(true);
            return th;
        });
        t.setRemoveOnCancelPolicy(true);
        this.timer = t;
    }

    /** {@return the server's address} */
    public InetSocketAddress address() {
        return address;
    }

    /** {@return replies that matched no pending call (late after a timeout, or bogus), dropped} */
    public long unmatchedReplies() {
        return unmatched.get();
    }

    /** {@return reply streams dropped for breaking the protocol} */
    public long protocolErrors() {
        return protocolErrors.get();
    }

    /** {@return connections opened so far} */
    public long connects() {
        return connects.get();
    }

    /** {@return calls that ended at their deadline} */
    public long timeouts() {
        return timeouts.get();
    }

    /** {@return connections dropped because the server stopped answering on them} */
    public long silentDrops() {
        return silentDrops.get();
    }

    private record Frame(int seq, byte[] bytes) {}

    private static final class Pending {
        final CompletableFuture<byte[]> future = new CompletableFuture<>();
        final int functionId;
        final Duration deadline;
        volatile ScheduledFuture<?> timeout;
        /** Set when the call is queued on a connection. */
        volatile Connection conn;
        volatile int seq;
        volatile long sentNanos;

        Pending(int functionId, Duration deadline) {
            this.functionId = functionId;
            this.deadline = deadline;
        }
    }

    /**
     * Calls function {@code functionId} with a struct_pack body.
     *
     * @param functionId coro_rpc's id of the function
     * @param body       the struct_pack-encoded parameters (empty for none)
     * @param deadline   how long to wait for the reply, connecting included
     * @return the reply body (a struct_pack message), or a future failed with {@link CoroRpcException}
     */
    public CompletableFuture<byte[]> call(int functionId, byte[] body, Duration deadline) {
        if (closed) {
            return CompletableFuture.failedFuture(new CoroRpcException(Kind.REJECTED, 0, "rpc client closed", null));
        }
        if (!inFlight.tryAcquire()) {
            return CompletableFuture.failedFuture(new CoroRpcException(Kind.REJECTED, 0, String.format(Locale.ROOT,
                    "%d calls already in flight to %s", options.maxInFlight(), address), null));
        }
        Pending p = new Pending(functionId, deadline);
        p.future.whenComplete((r, e) -> {
            inFlight.release();
            ScheduledFuture<?> t = p.timeout;
            if (t != null) {
                t.cancel(false);
            }
        });
        try {
            p.timeout = timer.schedule(() -> timedOut(p), deadline.toNanos(), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            p.future.completeExceptionally(new CoroRpcException(Kind.REJECTED, 0, "rpc client closed", null));
            return p.future;
        }
        Connection c = connection;
        if (c != null && !c.dead) {
            send(c, p, body);
        } else {
            connectThenSend(p, body);
        }
        return p.future;
    }

    /** Queues the call on {@code c} (nothing if it ended meanwhile, at its deadline). */
    private void send(Connection c, Pending p, byte[] body) {
        if (p.future.isDone()) {
            return;
        }
        int s = seq.incrementAndGet();
        p.seq = s;
        p.sentNanos = System.nanoTime();
        p.conn = c;
        c.pending.put(s, p);
        if (p.future.isDone()) {
            c.pending.remove(s, p);
            return;
        }
        byte[] frame = new byte[REQ_HEADER + body.length];
        frame[0] = MAGIC;
        putInt(frame, 4, s);
        putInt(frame, 8, p.functionId);
        putInt(frame, 12, body.length);
        System.arraycopy(body, 0, frame, REQ_HEADER, body.length);
        c.out.add(new Frame(s, frame));
        if (c.dead) {
            // the connection died between lookup and queueing: its failure sweep may have run already
            fail(c, s, new CoroRpcException(Kind.CONNECTION, 0, "connection to " + address + " lost", c.failure));
        }
    }

    /** A call's deadline passed: fail it, and count it against a connection that has been silent since. */
    private void timedOut(Pending p) {
        if (p.future.isDone()) {
            return;
        }
        Connection c = p.conn;
        String why = c != null ? "no reply" : "not connected";
        // the bookkeeping first, so that a caller who sees the timeout also sees its consequences
        boolean removed = c != null && c.pending.remove(p.seq, p);
        if (removed) {
            timeouts.incrementAndGet();
            if (c.lastReplyNanos - p.sentNanos < 0 && c.silentTimeouts.incrementAndGet() >= options.silentTimeoutsToDrop()) {
                silentDrops.incrementAndGet();
                LOG.warn("{} sent no reply for {} calls in a row, each past its deadline: dropping the connection",
                        address, c.silentTimeouts.get());
                c.die(new CoroRpcException(Kind.CONNECTION, 0, String.format(Locale.ROOT,
                        "connection to %s dropped: no reply for %d calls in a row", address, c.silentTimeouts.get()),
                        null));
            }
        }
        boolean failed = p.future.completeExceptionally(new CoroRpcException(Kind.TIMEOUT, 0, String.format(Locale.ROOT,
                "%s from %s to function %08x within %d ms", why, address, p.functionId, p.deadline.toMillis()), null));
        if (failed && !removed) {
            timeouts.incrementAndGet();
        }
    }

    private static void putInt(byte[] b, int off, int v) {
        for (int i = 0; i < 4; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    private static int getInt(byte[] b, int off) {
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v |= (b[off + i] & 0xff) << (8 * i);
        }
        return v;
    }

    /**
     * Sends the call on the live connection, or queues it (in call order) for the connection attempt
     * under way, starting one on a thread of its own if none is.
     */
    private void connectThenSend(Pending p, byte[] body) {
        synchronized (connectLock) {
            if (closed) {
                p.future.completeExceptionally(new CoroRpcException(Kind.REJECTED, 0, "rpc client closed", null));
                return;
            }
            Connection c = connection;
            if (c != null && !c.dead) {
                send(c, p, body);
                return;
            }
            if (waiting == null) {
                waiting = new ArrayList<>();
                // a platform thread: virtual threads' carriers may all be pinned by native transfers
                Thread.ofPlatform().daemon().name("coro-rpc-connect " + address).start(this::connect);
            }
            waiting.add(new Waiter(p, body));
        }
    }

    private void connect() {
        int timeoutMs = (int) Math.max(1, options.connectTimeout().toMillis());
        Socket sock = new Socket();
        CoroRpcException failure = null;
        try {
            sock.setTcpNoDelay(true);
            keepAlive(sock);
            sock.connect(address, timeoutMs);
        } catch (IOException e) {
            closeQuietly(sock);
            failure = new CoroRpcException(Kind.CONNECTION, 0, String.format(Locale.ROOT,
                    "cannot connect to %s within %d ms: %s", address, timeoutMs, e), e);
        }
        List<Waiter> queued;
        synchronized (connectLock) {
            queued = waiting;
            waiting = null;
            if (failure == null && closed) {
                closeQuietly(sock);
                failure = new CoroRpcException(Kind.REJECTED, 0, "rpc client closed", null);
            }
            if (failure == null) {
                connects.incrementAndGet();
                Connection c = new Connection(sock);
                connection = c;
                c.start();
                // in call order, before any later call can take the fast path
                for (Waiter w : queued) {
                    send(c, w.p(), w.body());
                }
                return;
            }
        }
        for (Waiter w : queued) {
            w.p().future.completeExceptionally(failure);
        }
    }

    /** TCP keepalive with short probes where the platform has them: a vanished peer ends the connection. */
    private static void keepAlive(Socket sock) throws IOException {
        sock.setKeepAlive(true);
        try {
            sock.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, 10);
            sock.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, 5);
            sock.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, 3);
        } catch (UnsupportedOperationException e) {
            // the system's keepalive timings apply
        }
    }

    private void fail(Connection c, int s, CoroRpcException e) {
        Pending p = c.pending.remove(s);
        if (p != null) {
            p.future.completeExceptionally(e);
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing after a failure: the first failure is the one reported
        }
    }

    /** One TCP connection with its writer and reader threads. */
    private final class Connection {
        final Socket socket;
        final Map<Integer, Pending> pending = new ConcurrentHashMap<>();
        final LinkedBlockingQueue<Frame> out = new LinkedBlockingQueue<>();
        final AtomicInteger silentTimeouts = new AtomicInteger();
        volatile long lastReplyNanos = System.nanoTime();
        volatile boolean dead;
        volatile Throwable failure;

        Connection(Socket socket) {
            this.socket = socket;
        }

        void start() {
            Thread w = new Thread(this::writeLoop, "coro-rpc-writer " + address);
            w.setDaemon(true);
            Thread r = new Thread(this::readLoop, "coro-rpc-reader " + address);
            r.setDaemon(true);
            w.start();
            r.start();
        }

        void writeLoop() {
            try {
                OutputStream os = new BufferedOutputStream(socket.getOutputStream(), 64 << 10);
                while (!dead) {
                    Frame f = out.take();
                    if (f == POISON) {
                        return;
                    }
                    os.write(f.bytes());
                    Frame next;
                    while ((next = out.poll()) != null && next != POISON) {
                        os.write(next.bytes());
                    }
                    os.flush();
                    if (next == POISON) {
                        return;
                    }
                }
            } catch (IOException e) {
                die(new CoroRpcException(Kind.CONNECTION, 0, "sending to " + address + " failed: " + e, e));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        void readLoop() {
            byte[] head = new byte[RESP_HEADER];
            try {
                InputStream in = socket.getInputStream();
                while (!dead) {
                    readFully(in, head, RESP_HEADER);
                    int magic = head[0] & 0xff;
                    int version = head[1] & 0xff;
                    int err = head[2] & 0xff;
                    int s = getInt(head, 4);
                    long len = getInt(head, 8) & 0xffffffffL;
                    long attach = getInt(head, 12) & 0xffffffffL;
                    if (magic != MAGIC || version != 0) {
                        throw protocol(String.format(Locale.ROOT,
                                "reply header with magic %d version %d (expected 21, 0)", magic, version));
                    }
                    if (len + attach > options.maxFrameBytes()) {
                        throw protocol(String.format(Locale.ROOT, "reply of %d + %d bytes exceeds the %d-byte limit",
                                len, attach, options.maxFrameBytes()));
                    }
                    byte[] body = readBody(in, (int) len);
                    skip(in, attach);
                    lastReplyNanos = System.nanoTime();
                    silentTimeouts.set(0);
                    Pending p = pending.remove(s);
                    if (p == null) {
                        unmatched.incrementAndGet();
                        LOG.debug("dropped a reply with seq {} from {} that no call waits for", s, address);
                        continue;
                    }
                    if (err == 0) {
                        p.future.complete(body);
                    } else {
                        p.future.completeExceptionally(remoteError(err, body, p.functionId));
                    }
                }
            } catch (CoroRpcException e) {
                protocolErrors.incrementAndGet();
                die(e);
            } catch (IOException e) {
                die(new CoroRpcException(Kind.CONNECTION, 0, "connection to " + address + " lost: " + e, e));
            }
        }

        private CoroRpcException protocol(String msg) {
            return new CoroRpcException(Kind.PROTOCOL, 0, "protocol error from " + address + ": " + msg, null);
        }

        void die(CoroRpcException e) {
            if (dead) {
                return;
            }
            failure = e;
            dead = true;
            out.offer(POISON);
            closeQuietly(socket);
            for (Integer s : pending.keySet()) {
                fail(this, s, e);
            }
        }
    }

    /** The message of a server error: a struct_pack string, or for code 255 a (u16 code, string) pair. */
    private CoroRpcException remoteError(int err, byte[] body, int functionId) {
        int code = err;
        String msg;
        try {
            if (err == 255) {
                int[] c = new int[1];
                msg = StructPack.decode(body, SpType.struct(SpType.UINT16, SpType.STRING), r -> {
                    c[0] = r.u16();
                    return r.string();
                });
                code = c[0];
            } else {
                msg = StructPack.decode(body, SpType.STRING, StructPackReader::string);
            }
        } catch (StructPackException e) {
            msg = "(undecodable message: " + e.getMessage() + ")";
        }
        return new CoroRpcException(Kind.REMOTE, code, String.format(Locale.ROOT,
                "%s answered function %08x with rpc error %d (%s): %s", address, functionId, code,
                CoroRpcException.remoteCodeName(code), msg), null);
    }

    private static void readFully(InputStream in, byte[] b, int n) throws IOException {
        int off = 0;
        while (off < n) {
            int r = in.read(b, off, n - off);
            if (r < 0) {
                throw new EOFException("end of stream after " + off + " of " + n + " bytes");
            }
            off += r;
        }
    }

    /** Reads {@code len} bytes into a buffer grown as they arrive (a claimed length costs nothing). */
    private static byte[] readBody(InputStream in, int len) throws IOException {
        byte[] b = new byte[Math.min(len, 64 << 10)];
        int off = 0;
        while (off < len) {
            if (off == b.length) {
                b = Arrays.copyOf(b, (int) Math.min(len, 2L * b.length));
            }
            int r = in.read(b, off, b.length - off);
            if (r < 0) {
                throw new EOFException("end of stream inside a reply body, " + off + " of " + len + " bytes");
            }
            off += r;
        }
        return b;
    }

    private static void skip(InputStream in, long n) throws IOException {
        byte[] scratch = new byte[(int) Math.min(n, 8192)];
        while (n > 0) {
            int r = in.read(scratch, 0, (int) Math.min(n, scratch.length));
            if (r < 0) {
                throw new EOFException("end of stream inside an attachment");
            }
            n -= r;
        }
    }

    /** Drops the connection (pending calls fail); the next call connects again. For tests and faults. */
    public void disconnect() {
        Connection c = connection;
        if (c != null) {
            c.die(new CoroRpcException(Kind.CONNECTION, 0, "connection to " + address + " closed by the client", null));
        }
    }

    @Override
    public void close() {
        closed = true;
        synchronized (connectLock) {
            Connection c = connection;
            if (c != null) {
                c.die(new CoroRpcException(Kind.REJECTED, 0, "rpc client closed", null));
            }
        }
        timer.shutdownNow();
    }
}
