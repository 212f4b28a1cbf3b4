package io.mooncake4j.engine.handshake;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The handshake (RPC port) server (Mooncake {@code SocketHandShakePlugin::startDaemon}).
 *
 * <p>One acceptor thread ({@code mooncake-handshake-accept-N}) hands each connection to a virtual
 * thread ({@code mooncake-handshake-serve-N}). Per connection: read one frame (each read within
 * {@link HandshakeConfig#serverReadTimeoutMs()}), parse its JSON, call the handler, write the reply
 * with the same type byte (a legacy request gets a legacy reply), half-close, wait for the client's
 * EOF, close. The whole connection lives at most {@link HandshakeConfig#serverRequestTimeoutMs()}
 * from accept: at that deadline it is closed whatever the client does (a slowloris trickling one byte
 * per read timeout is cut off). At most {@link HandshakeConfig#maxConcurrentConnections()} are open;
 * a new connection beyond that closes the oldest one, so slow connections cannot keep a new peer
 * from being served. A malformed frame, malformed JSON or a handler failure closes that connection
 * without reply and logs one line (at DEBUG once past the first 20); the server keeps serving.
 *
 * <p>Thread-safe; {@link #close()} stops the acceptor, closes open connections and waits for the
 * serving threads.
 */
public final class HandshakeServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(HandshakeServer.class);
    private static final AtomicInteger ACCEPTORS = new AtomicInteger();
    private static final AtomicLong SERVERS = new AtomicLong();

    /** Answers one request. */
    @FunctionalInterface
    public interface Handler {
        /**
         * @param type    {@link HandshakeFrame#CONNECTION} (also for legacy frames) ... {@link HandshakeFrame#PROBE}
         * @param request the parsed request JSON
         * @return the reply payload (jsoncpp style, trailing LF), or null for "no callback" ({@code null\n})
         * @throws Exception to drop the connection without reply
         */
        String handle(int type, Object request) throws Exception;
    }

    private final HandshakeConfig config;
    private final Handler handler;
    private final ServerSocket listener;
    private final Thread acceptor;
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    private final ConcurrentLinkedDeque<Socket> acceptOrder = new ConcurrentLinkedDeque<>();
    private final Set<Thread> serving = ConcurrentHashMap.newKeySet();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong expired = new AtomicLong();
    private final AtomicLong evicted = new AtomicLong();
    private volatile boolean closed;

    private HandshakeServer(HandshakeConfig config, Handler handler, ServerSocket listener) {
        this.config = config;
        this.handler = handler;
        this.listener = listener;
        this.acceptor = Thread.ofPlatform().daemon(true)
                .name("mooncake-handshake-accept-" + ACCEPTORS.getAndIncrement())
                .unstarted(this::acceptLoop);
    }

    /** Binds the RPC port (Mooncake's random-range rule, see {@link PortBinder}) and starts serving. */
    public static HandshakeServer start(HandshakeConfig config, Handler handler) throws IOException {
        ServerSocket ss = PortBinder.bind(config, addr -> {
            ServerSocket s = new ServerSocket();
            try {
                s.setReuseAddress(true);
                s.bind(addr, config.backlog());
                return s;
            } catch (IOException e) {
                s.close();
                throw e;
            }
        });
        HandshakeServer server = new HandshakeServer(config, handler, ss);
        server.acceptor.start();
        return server;
    }

    /** The bound RPC port. */
    public int port() {
        return listener.getLocalPort();
    }

    /** Connections dropped for malformed input so far. */
    public long rejectedConnections() {
        return rejected.get();
    }

    /** Connections closed at the total request deadline so far. */
    public long expiredConnections() {
        return expired.get();
    }

    /** Connections closed to make room for a newer one (at the connection cap) so far. */
    public long evictedConnections() {
        return evicted.get();
    }

    /** Connections open now. */
    public int openConnections() {
        return open.size();
    }

    private void acceptLoop() {
        long serial = SERVERS.getAndIncrement();
        AtomicInteger conn = new AtomicInteger();
        while (!closed) {
            Socket s;
            try {
                s = listener.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.error("handshake listener on port {} failed; no more handshakes will be served", port(), e);
                }
                return;
            }
            while (open.size() >= config.maxConcurrentConnections()) {
                Socket oldest = acceptOrder.pollFirst();
                if (oldest == null) {
                    break;
                }
                if (open.remove(oldest)) {
                    evicted.incrementAndGet();
                    closeQuietly(oldest);
                }
            }
            open.add(s);
            acceptOrder.addLast(s);
            if (closed) {
                closeQuietly(s);
                return;
            }
            Thread t = Thread.ofVirtual()
                    .name("mooncake-handshake-serve-" + serial + "-" + conn.getAndIncrement())
                    .unstarted(() -> {
                        SocketDeadlines.Deadline d = SocketDeadlines.arm(s, config.serverRequestTimeoutMs());
                        try {
                            serve(s);
                        } finally {
                            d.close();
                            if (d.fired()) {
                                expired.incrementAndGet();
                            }
                            open.remove(s);
                            acceptOrder.remove(s);
                            closeQuietly(s);
                            serving.remove(Thread.currentThread());
                        }
                    });
            serving.add(t);
            t.start();
        }
    }

    private void serve(Socket s) {
        String peer = String.valueOf(s.getRemoteSocketAddress());
        HandshakeFrame req;
        try {
            s.setSoTimeout(config.serverReadTimeoutMs());
            req = HandshakeFrame.read(s.getInputStream(), config.maxFrameLength());
        } catch (IOException e) {
            if (s.isClosed()) {
                LOG.debug("handshake: connection from {} closed by the deadline or the connection cap", peer);
            } else if (!closed) {
                warn("handshake: dropping connection from {}: {}", peer, e.getMessage());
            }
            return;
        }
        Object json;
        try {
            json = Json.parse(req.json());
        } catch (JsonException e) {
            warn("handshake: dropping {} request from {}: malformed JSON: {}",
                    HandshakeFrame.typeName(req.type()), peer, e.getMessage());
            return;
        }
        int type = req.legacy() ? HandshakeFrame.CONNECTION : req.type();
        String reply;
        try {
            reply = handler.handle(type, json);
        } catch (Exception e) {
            warn("handshake: dropping {} request from {}: {}", HandshakeFrame.typeName(req.type()), peer,
                    e.toString());
            return;
        }
        try {
            OutputStream out = s.getOutputStream();
            out.write(new HandshakeFrame(req.type(), reply == null ? "null\n" : reply).encode());
            out.flush();
            s.shutdownOutput();
            InputStream in = s.getInputStream();
            byte[] sink = new byte[64];
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(
                    Math.min(config.serverReadTimeoutMs(), config.serverRequestTimeoutMs()));
            while (System.nanoTime() < deadline && in.read(sink) >= 0) {
                // wait for the client to close; anything it sends is ignored
            }
        } catch (SocketException e) {
            LOG.debug("handshake: {} closed while replying: {}", peer, e.getMessage());
        } catch (IOException e) {
            if (!closed) {
                LOG.debug("handshake: reply to {} not completed: {}", peer, e.getMessage());
            }
        }
    }

    /** Counts a rejection and logs it: WARN for the first 20, then DEBUG (a flood must not flood the log). */
    private void warn(String fmt, Object... args) {
        long n = rejected.incrementAndGet();
        if (n <= 20) {
            LOG.warn(n == 20 ? fmt + " (further rejections at DEBUG; see rejectedConnections())" : fmt, args);
        } else {
            LOG.debug(fmt, args);
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            LOG.debug("closing handshake socket: {}", e.getMessage());
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            LOG.debug("closing handshake listener: {}", e.getMessage());
        }
        for (Socket s : open) {
            closeQuietly(s);
        }
        join(acceptor);
        for (Thread t : serving) {
            join(t);
        }
    }

    private static void join(Thread t) {
        try {
            if (!t.join(java.time.Duration.ofSeconds(10))) {
                LOG.warn("thread {} did not stop within 10 s", t.getName());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "HandshakeServer[port=%d]", port());
    }
}
