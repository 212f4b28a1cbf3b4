package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry.Buffer;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.PortBinder;
import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The target side of the TCP transport (Mooncake {@code ServerSession}): a listener on the data
 * port and one virtual thread per connection ({@code mooncake-target-tcp-N}), so that both
 * Mooncake's one-shot clients (a connection per request, many at once) and persistent lanes are
 * served. Per request:
 *
 * <ol>
 *   <li>read the 24-byte header; EOF at a header boundary ends the session quietly;</li>
 *   <li>validate: size &gt; 0, {@code addr + size} does not wrap, the range lies inside one
 *       registered buffer, opcode (bits 0-6) is READ or WRITE — otherwise v2 sends
 *       {@code ADDR_REJECTED} and closes, v1 closes; no memory is touched;</li>
 *   <li>WRITE: read the body straight into registered memory; v2 then sends {@code OK};</li>
 *   <li>READ: v2 sends {@code OK}, then the body straight from registered memory.</li>
 * </ol>
 *
 * Any I/O error (a peer disconnecting mid-body) ends that session only. There is no read timeout
 * (as in Mooncake). Thread-safe; {@link #close()} closes the listener and every session.
 *
 * <p>Divergence: Mooncake serves any opcode other than WRITE as a READ; this server rejects
 * opcodes other than 0 and 1 (no C++ client sends them).
 */
final class TcpDataServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(TcpDataServer.class);
    private static final AtomicInteger SERVERS = new AtomicInteger();

    private final LocalMemory memory;
    private final ServerSocketChannel listener;
    private final Thread acceptor;
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();
    private final AtomicLong sessionCounter = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final int serial = SERVERS.getAndIncrement();
    private volatile boolean closed;

    private TcpDataServer(LocalMemory memory, ServerSocketChannel listener) {
        this.memory = memory;
        this.listener = listener;
        this.acceptor = Thread.ofPlatform().daemon(true).name("mooncake-target-accept-" + serial)
                .unstarted(this::acceptLoop);
    }

    /** Binds the data port (same random range as the RPC port) and starts accepting. */
    static TcpDataServer start(HandshakeConfig cfg, LocalMemory memory) throws IOException {
        ServerSocketChannel ch = PortBinder.bind(cfg, addr -> {
            ServerSocketChannel s = ServerSocketChannel.open();
            try {
                s.bind(addr, Math.max(cfg.backlog(), 1024));
                return s;
            } catch (IOException e) {
                s.close();
                throw e;
            }
        });
        TcpDataServer server = new TcpDataServer(memory, ch);
        server.acceptor.start();
        return server;
    }

    int port() {
        return listener.socket().getLocalPort();
    }

    /** Requests rejected so far (outside registered memory, bad opcode). */
    long rejectedRequests() {
        return rejected.get();
    }

    /** Sessions currently open. */
    int openSessions() {
        return sessions.size();
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel c;
            try {
                c = listener.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.error("data listener on port {} failed; no more connections will be accepted", port(), e);
                }
                return;
            }
            try {
                c.setOption(StandardSocketOptions.TCP_NODELAY, true);
            } catch (IOException e) {
                LOG.debug("TCP_NODELAY: {}", e.getMessage());
            }
            Session s = new Session(c);
            sessions.add(s);
            if (closed) {
                s.abort();
                sessions.remove(s);
                return;
            }
            s.thread = Thread.ofVirtual().name("mooncake-target-tcp-" + serial + "-" + sessionCounter.getAndIncrement())
                    .unstarted(s::run);
            s.thread.start();
        }
    }

    private static final int LINGER_MS = 2000;

    private final class Session {
        final SocketChannel ch;
        final LocalMemory.Slot slot;
        volatile Thread thread;

        Session(SocketChannel ch) {
            this.ch = ch;
            this.slot = memory.slot(this::abort);
        }

        void lingerAndDiscard() {
            lingerAndDiscardOn(ch);
        }

        void abort() {
            try {
                ch.close();
            } catch (IOException e) {
                LOG.debug("close: {}", e.getMessage());
            }
        }

        void run() {
            String peer = "?";
            try {
                peer = String.valueOf(ch.getRemoteAddress());
                serve(peer);
            } catch (IOException e) {
                if (!closed) {
                    LOG.debug("data session with {} ended: {}", peer, e.toString());
                }
            } catch (RuntimeException | Error e) {
                LOG.error("data session with {} failed", peer, e);
                throw e;
            } finally {
                slot.close();
                abort();
                sessions.remove(this);
            }
        }

        private void serve(String peer) throws IOException {
            LocalMemory.Views views = new LocalMemory.Views(memory);
            ByteBuffer header = ByteBuffer.allocateDirect(TcpWire.HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            ByteBuffer status = ByteBuffer.allocateDirect(TcpWire.STATUS_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            ByteBuffer[] gather = new ByteBuffer[2];
            while (!closed) {
                header.clear();
                while (header.hasRemaining()) {
                    if (ch.read(header) < 0) {
                        if (header.position() != 0) {
                            LOG.warn("data session with {}: connection closed inside a header ({} of 24 bytes)",
                                    peer, header.position());
                        }
                        return;
                    }
                }
                long size = header.getLong(0);
                long addr = header.getLong(8);
                int opcode = header.get(16) & 0xff;
                boolean v2 = (opcode & TcpWire.V2_FLAG) != 0;
                int op = opcode & 0x7f;
                Buffer buf = (op == TcpWire.OP_READ || op == TcpWire.OP_WRITE) && TcpWire.validRange(addr, size)
                        ? memory.registry.find(addr, size) : null;
                if (buf == null || !slot.enter(0, buf)) {
                    rejected.incrementAndGet();
                    LOG.warn("data session with {}: rejecting opcode 0x{} of {} bytes at 0x{}: {}; closing", peer,
                            Integer.toHexString(opcode), Long.toUnsignedString(size), Long.toHexString(addr),
                            op > 1 ? "unknown opcode" : "outside registered memory");
                    if (v2) {
                        status.clear();
                        status.putLong(0, TcpWire.STATUS_ADDR_REJECTED);
                        while (status.hasRemaining()) {
                            ch.write(status);
                        }
                    }
                    lingerAndDiscard();
                    return;
                }
                try {
                    if (op == TcpWire.OP_WRITE) {
                        long done = 0;
                        while (done < size) {
                            ByteBuffer body = views.view(buf, addr + done, size - done);
                            int n = body.remaining();
                            while (body.hasRemaining()) {
                                if (ch.read(body) < 0) {
                                    LOG.warn("data session with {}: connection closed after {} of {} body "
                                            + "bytes of a write to 0x{}", peer, done + n - body.remaining(), size,
                                            Long.toHexString(addr));
                                    return;
                                }
                            }
                            done += n;
                        }
                        if (v2) {
                            status.clear();
                            status.putLong(0, TcpWire.STATUS_OK);
                            while (status.hasRemaining()) {
                                ch.write(status);
                            }
                        }
                    } else {
                        status.clear();
                        status.putLong(0, TcpWire.STATUS_OK);
                        if (!v2) {
                            status.position(status.limit());
                        }
                        long done = 0;
                        while (done < size) {
                            ByteBuffer body = views.view(buf, addr + done, size - done);
                            int n = body.remaining();
                            gather[0] = status;
                            gather[1] = body;
                            while (body.hasRemaining()) {
                                ch.write(gather, status.hasRemaining() ? 0 : 1, status.hasRemaining() ? 2 : 1);
                            }
                            done += n;
                        }
                        gather[1] = null;
                    }
                } finally {
                    slot.exit(0);
                }
            }
        }
    }

    /**
     * After a rejection: half-close and discard what the peer still sends (a WRITE body) until it
     * closes, for at most {@link #LINGER_MS}, so the kernel does not answer unread data with a
     * reset that could destroy the rejection status frame before the peer read it.
     */
    private void lingerAndDiscardOn(SocketChannel ch) {
        try {
            ch.shutdownOutput();
            ch.socket().setSoTimeout(LINGER_MS);
            java.io.InputStream in = ch.socket().getInputStream();
            byte[] sink = new byte[16384];
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(LINGER_MS);
            while (System.nanoTime() < deadline && in.read(sink) >= 0) {
                // discard
            }
        } catch (IOException e) {
            LOG.debug("linger after rejection: {}", e.getMessage());
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
            LOG.debug("closing data listener: {}", e.getMessage());
        }
        join(acceptor);
        for (Session s : sessions) {
            s.abort();
        }
        for (Session s : sessions) {
            Thread t = s.thread;
            if (t != null) {
                join(t);
            }
        }
    }

    private static void join(Thread t) {
        try {
            if (!t.join(Duration.ofSeconds(10))) {
                LOG.error("thread {} did not stop within 10 s", t.getName());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
