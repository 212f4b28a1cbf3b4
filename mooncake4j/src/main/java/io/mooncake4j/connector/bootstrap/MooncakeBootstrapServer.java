package io.mooncake4j.connector.bootstrap;

import static io.mooncake4j.connector.bootstrap.BootstrapHttp.detail;
import static io.mooncake4j.connector.bootstrap.BootstrapHttp.readHead;
import static io.mooncake4j.connector.bootstrap.BootstrapHttp.write;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.bootstrap.BootstrapHttp.Request;
import io.mooncake4j.connector.bootstrap.BootstrapHttp.Response;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * vLLM's {@code MooncakeBootstrapServer}: the HTTP rendezvous where every P worker registers its
 * side-channel address and D looks them up. Run by one P worker per engine group
 * ({@link BootstrapAddresses#shouldLaunchBootstrapServer}).
 *
 * <h2>HTTP API (as vLLM's FastAPI app)</h2>
 * <ul>
 *   <li>{@code POST /register}, JSON {@code {engine_id, dp_rank, tp_rank, pp_rank, addr}}:
 *     200 {@code {"status":"ok"}}; 400 {@code {"detail":"Engine ID mismatch for dp_rank=…: expected …, got …"}}
 *     when the DP rank already belongs to another engine id; 400
 *     {@code {"detail":"Worker with dp_rank=…, tp_rank=…, pp_rank=… is already registered at …, but still want to register at …"}}
 *     for a second registration of the same (dp, tp, pp); 422 with a pydantic-style
 *     {@code {"detail":[{"type","loc","msg","input"}…]}} for a body that is not JSON, not an object, or
 *     lacks or mistypes a field (ints accept JSON integers, integral floats, bools and integer strings,
 *     like pydantic's lax mode; strings must be JSON strings).</li>
 *   <li>{@code GET /query}: 200 with
 *     {@code {"<dp>":{"engine_id":"…","worker_addr":{"<tp>":{"<pp>":"tcp://…"}}}}} ({@code {}} when empty),
 *     in registration order.</li>
 *   <li>mooncake4j extension: a {@code /register} body may carry {@code mooncake4j_kv_layout} (a string, what
 *     the worker's KV blocks mean); the first one of a DP rank is returned in its {@code /query} entry under the
 *     same key, and a later worker of that rank with another one is refused (400 {@code "KV layout mismatch
 *     for dp_rank=…"}). vLLM's server ignores the key (pydantic drops unknown fields) and vLLM's D reads only
 *     {@code engine_id} and {@code worker_addr} of an entry, so either side may be vLLM's.</li>
 *   <li>Other paths: 404 {@code {"detail":"Not Found"}}; other methods: 405 {@code {"detail":"Method Not Allowed"}}.</li>
 * </ul>
 *
 * <h2>Hardening beyond vLLM ({@link Limits})</h2>
 * Every request that can be parsed far enough to know it is HTTP gets an answer with a JSON
 * {@code detail}: 400 for a malformed request line, header or {@code Content-Length}, 411 for a
 * body without {@code Content-Length} (chunked bodies are not accepted), 413 for a body over
 * {@link Limits#maxBodyBytes()}, 431 for a request head over {@link Limits#maxHeaderBytes()}, 400
 * when the registration table is full ({@link Limits#maxEngines()} DP ranks,
 * {@link Limits#maxWorkersPerEngine()} workers per rank, {@link Limits#maxWorkers()} in all), 422
 * {@code string_too_long} for an {@code engine_id} or {@code addr} over {@value #MAX_FIELD_CHARS}
 * characters. Echoed
 * inputs never carry non-finite numbers ({@code 1e999} is echoed as the string {@code "Infinity"}).
 * Each connection serves one request ({@code Connection: close}) within a total deadline of
 * {@link Limits#requestTimeoutMs()} from accept to the last byte of the answer, after which it is
 * closed whatever the client is doing; at most {@link Limits#maxConnections()} are open. A new
 * connection beyond that closes an answered one that is only draining, or else evicts the oldest
 * connection still sending its request from the peer address that holds the most such connections
 * (503 {@code detail} first), so that trickling clients, even many from one address, cannot keep
 * others' {@code /query} from being answered; when every open connection is processing a request
 * the newcomer is answered 503. A request is acted on only once it is no longer evictable, so a
 * registration is stored exactly when it is answered 200 ({@link #evictedConnections()},
 * {@link #refusedConnections()}, {@link #expiredConnections()}).
 *
 * <h2>Lifecycle and threads</h2>
 * The constructor binds nothing; {@link #start()} binds {@code host:port} (port 0: any free port,
 * see {@link #port()}) and is idempotent; {@link #close()} stops the acceptor
 * ({@code mooncake-bootstrap-http-accept-<n>}, a platform thread), the deadline reaper and the
 * per-connection virtual threads ({@code mooncake-bootstrap-http-<n>}), and is idempotent.
 * The registry is guarded by this object's lock; all methods are thread-safe.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py</a>
 */
public final class MooncakeBootstrapServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeBootstrapServer.class);
    private static final AtomicInteger THREAD_IDS = new AtomicInteger();

    /** Default bind host of vLLM's bootstrap server. */
    public static final String DEFAULT_HOST = "0.0.0.0";
    static final int MAX_BODY_BYTES = 1 << 20;
    /** Longest {@code engine_id} and {@code addr} accepted, so that the bounded table is bounded in bytes too. */
    static final int MAX_FIELD_CHARS = 1024;

    /**
     * What one client can make the server spend. {@link #fromEnvironment()} reads
     * {@code MOONCAKE4J_BOOTSTRAP_REQUEST_TIMEOUT_MS} (default 10000),
     * {@code MOONCAKE4J_BOOTSTRAP_MAX_CONNECTIONS} (256), {@code MOONCAKE4J_BOOTSTRAP_MAX_ENGINES} (1024),
     * {@code MOONCAKE4J_BOOTSTRAP_MAX_WORKERS_PER_ENGINE} (1024) and {@code MOONCAKE4J_BOOTSTRAP_MAX_WORKERS}
     * (8192); bad values fall back to the default with one WARN.
     *
     * @param requestTimeoutMs    total time from accept to the end of the answer; then the connection is closed
     * @param maxConnections      connections open at once; one more evicts the oldest still-sending connection of
     *                            the address holding the most (see the class comment)
     * @param maxHeaderBytes      request line plus headers
     * @param maxBodyBytes        request body
     * @param maxEngines          DP ranks in the table
     * @param maxWorkersPerEngine (tp, pp) workers per DP rank
     * @param maxWorkers          workers in the whole table
     */
    public record Limits(int requestTimeoutMs, int maxConnections, int maxHeaderBytes, int maxBodyBytes,
            int maxEngines, int maxWorkersPerEngine, int maxWorkers) {

        public Limits {
            if (requestTimeoutMs < 1 || maxConnections < 1 || maxHeaderBytes < 64 || maxBodyBytes < 1
                    || maxEngines < 1 || maxWorkersPerEngine < 1 || maxWorkers < 1) {
                throw new IllegalArgumentException("bootstrap server limits must be positive (headers >= 64 bytes)");
            }
        }

        /** The defaults. */
        public static Limits defaults() {
            return new Limits(10_000, 256, 16 * 1024, MAX_BODY_BYTES, 1024, 1024, 8192);
        }

        /** The defaults with the process environment applied. */
        public static Limits fromEnvironment() {
            return fromEnvironment(System.getenv());
        }

        /** The defaults with {@code env} applied. */
        public static Limits fromEnvironment(Map<String, String> env) {
            Limits d = defaults();
            return new Limits(
                    positive(env, "MOONCAKE4J_BOOTSTRAP_REQUEST_TIMEOUT_MS", d.requestTimeoutMs),
                    positive(env, "MOONCAKE4J_BOOTSTRAP_MAX_CONNECTIONS", d.maxConnections),
                    d.maxHeaderBytes, d.maxBodyBytes,
                    positive(env, "MOONCAKE4J_BOOTSTRAP_MAX_ENGINES", d.maxEngines),
                    positive(env, "MOONCAKE4J_BOOTSTRAP_MAX_WORKERS_PER_ENGINE", d.maxWorkersPerEngine),
                    positive(env, "MOONCAKE4J_BOOTSTRAP_MAX_WORKERS", d.maxWorkers));
        }

        /** A copy with another deadline and connection cap (tests). */
        public Limits withConnections(int requestTimeoutMs, int maxConnections) {
            return new Limits(requestTimeoutMs, maxConnections, maxHeaderBytes, maxBodyBytes, maxEngines,
                    maxWorkersPerEngine, maxWorkers);
        }

        /** A copy with other table bounds (tests). */
        public Limits withTable(int maxEngines, int maxWorkersPerEngine, int maxWorkers) {
            return new Limits(requestTimeoutMs, maxConnections, maxHeaderBytes, maxBodyBytes, maxEngines,
                    maxWorkersPerEngine, maxWorkers);
        }

        private static int positive(Map<String, String> env, String name, int def) {
            String v = env.get(name);
            if (v == null || v.isBlank()) {
                return def;
            }
            try {
                int i = Integer.parseInt(v.strip());
                if (i >= 1) {
                    return i;
                }
            } catch (NumberFormatException e) {
                // fall through to the warning
            }
            LOG.warn("ignoring {}='{}': must be a positive integer; using {}", name, v, def);
            return def;
        }
    }

    private final String host;
    private final int requestedPort;
    private final Limits limits;
    private final Object lock = new Object();
    /** dp_rank → entry; guarded by {@link #lock}. */
    private final Map<Integer, MutableEntry> workers = new LinkedHashMap<>();
    private int workerCount; // guarded by lock
    /** Open connections (counted against {@link Limits#maxConnections()}). */
    private final Map<Socket, Conn> open = new ConcurrentHashMap<>();
    /** Connections refused or evicted with a 503, draining for at most 1 s; not counted against the cap. */
    private final Map<Socket, Conn> closing = new ConcurrentHashMap<>();
    private final Set<Thread> serving = ConcurrentHashMap.newKeySet();
    private final AtomicLong evicted = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong expired = new AtomicLong();
    private final AtomicLong acceptSeq = new AtomicLong();
    private ServerSocket listener; // guarded by lock
    private Thread acceptor; // guarded by lock
    private Thread reaper; // guarded by lock
    private volatile boolean closed;

    /**
     * One accepted connection. Its state moves {@code READING → PROCESSING → ANSWERED} in its own
     * thread; the acceptor may move {@code READING → EVICTED} (the client then gets a 503 from the
     * acceptor). A request is acted on (a registration stored) only after its thread won
     * {@code READING → PROCESSING}, so an evicted connection never changes the table and a
     * processing one is never closed by the cap: every request gets an answer or a 503.
     */
    private static final class Conn {
        static final int READING = 0;
        static final int PROCESSING = 1;
        static final int ANSWERED = 2;
        static final int EVICTED = 3;

        final Socket socket;
        final java.net.InetAddress peer;
        final long seq;
        volatile long deadline;
        final AtomicInteger state = new AtomicInteger(READING);

        Conn(Socket socket, long seq, long deadline) {
            this.socket = socket;
            this.peer = socket.getInetAddress();
            this.seq = seq;
            this.deadline = deadline;
        }

        boolean begin() {
            return state.compareAndSet(READING, PROCESSING);
        }
    }

    private static final class MutableEntry {
        final String engineId;
        final Map<Integer, Map<Integer, String>> workerAddr = new LinkedHashMap<>();
        String kvLayout; // the first one registered; null when no worker sent one

        MutableEntry(String engineId) {
            this.engineId = engineId;
        }
    }

    /**
     * A server for {@code host:port} (not yet started) with {@link Limits#fromEnvironment()}.
     *
     * @param host bind address, e.g. {@value #DEFAULT_HOST} or {@code 127.0.0.1}
     * @param port TCP port, 0 for any free port
     */
    public MooncakeBootstrapServer(String host, int port) {
        this(host, port, Limits.fromEnvironment());
    }

    /**
     * A server for {@code host:port} (not yet started) with explicit limits.
     *
     * @param host   bind address
     * @param port   TCP port, 0 for any free port
     * @param limits what one client can make the server spend
     */
    public MooncakeBootstrapServer(String host, int port, Limits limits) {
        this.host = Objects.requireNonNull(host, "host");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be in 0..65535, got " + port);
        }
        this.requestedPort = port;
        this.limits = Objects.requireNonNull(limits, "limits");
    }

    /**
     * Binds and starts serving; a no-op when already started.
     *
     * @throws ConnectorException if the address cannot be bound, or the server was closed
     */
    public void start() {
        synchronized (lock) {
            if (closed) {
                throw new ConnectorException("bootstrap server on " + host + ":" + requestedPort + " is closed");
            }
            if (listener != null) {
                return;
            }
            ServerSocket s;
            try {
                s = new ServerSocket();
                try {
                    s.setReuseAddress(true);
                    s.bind(new InetSocketAddress(host, requestedPort), 128);
                } catch (IOException e) {
                    s.close();
                    throw e;
                }
            } catch (IOException e) {
                throw new ConnectorException(String.format(Locale.ROOT,
                        "Cannot bind the Mooncake bootstrap server to %s:%d (%s); is another server using the port? "
                                + "Set VLLM_MOONCAKE_BOOTSTRAP_PORT to a free port.", host, requestedPort, e.getMessage()), e);
            }
            listener = s;
            int id = THREAD_IDS.getAndIncrement();
            acceptor = Thread.ofPlatform().daemon(true).name("mooncake-bootstrap-http-accept-" + id)
                    .unstarted(() -> acceptLoop(s));
            reaper = Thread.ofVirtual().name("mooncake-bootstrap-http-reaper-" + id).unstarted(this::reapLoop);
            acceptor.start();
            reaper.start();
            LOG.info("Mooncake bootstrap server listening on {}:{}", host, s.getLocalPort());
        }
    }

    /** The bound port (useful with port 0); -1 before {@link #start()}. */
    public int port() {
        synchronized (lock) {
            return listener == null ? -1 : listener.getLocalPort();
        }
    }

    /** The bind host given to the constructor. */
    public String host() {
        return host;
    }

    /** The limits this server applies. */
    public Limits limits() {
        return limits;
    }

    /** Whether {@link #start()} ran and {@link #close()} did not. */
    public boolean isRunning() {
        synchronized (lock) {
            return listener != null && !closed;
        }
    }

    /** Connections open now (for tests and monitoring). */
    public int openConnections() {
        return open.size();
    }

    /** Connections closed so far because they ran past the request deadline. */
    public long expiredConnections() {
        return expired.get();
    }

    /**
     * Connections closed so far to make room for a newer one (at {@link Limits#maxConnections()}):
     * an answered one still draining, or the oldest connection still sending its request from the
     * address that holds the most connections (that one is answered 503 first).
     */
    public long evictedConnections() {
        return evicted.get();
    }

    /**
     * New connections answered 503 at once because every open connection was processing a request
     * (at {@link Limits#maxConnections()}).
     */
    public long refusedConnections() {
        return refused.get();
    }

    /** A snapshot of the registry, as {@code GET /query} would return it. */
    public BootstrapQueryResult workers() {
        synchronized (lock) {
            Map<Integer, EngineEntry> out = new LinkedHashMap<>();
            workers.forEach((dp, e) -> out.put(dp, new EngineEntry(e.engineId, e.workerAddr, e.kvLayout)));
            return new BootstrapQueryResult(out);
        }
    }

    /** vLLM's {@code shutdown()}: stops serving and the threads; idempotent. */
    @Override
    public void close() {
        ServerSocket s;
        Thread a;
        Thread r;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            s = listener;
            a = acceptor;
            r = reaper;
        }
        if (s != null) {
            try {
                s.close();
            } catch (IOException e) {
                LOG.debug("closing bootstrap listener: {}", e.getMessage());
            }
        }
        for (Socket c : open.keySet()) {
            closeQuietly(c);
        }
        for (Socket c : closing.keySet()) {
            closeQuietly(c);
        }
        for (Thread t : new Thread[] {a, r}) {
            if (t != null) {
                LockSupport.unpark(t);
                join(t);
            }
        }
        for (Thread t : serving) {
            join(t);
        }
        LOG.debug("Mooncake bootstrap server on {} stopped", host);
    }

    private static void join(Thread t) {
        try {
            if (!t.join(Duration.ofSeconds(5))) {
                LOG.warn("Mooncake bootstrap server thread {} did not stop within 5 s", t.getName());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            LOG.debug("closing bootstrap connection: {}", e.getMessage());
        }
    }

    // ------------------------------------------------------------------ connections

    private void acceptLoop(ServerSocket ss) {
        AtomicInteger conn = new AtomicInteger();
        while (!closed) {
            Socket c;
            try {
                c = ss.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.error("Mooncake bootstrap listener on {}:{} failed; no more requests will be served", host,
                            ss.getLocalPort(), e);
                }
                return;
            }
            long now = System.nanoTime();
            Conn k = new Conn(c, acceptSeq.getAndIncrement(),
                    now + TimeUnit.MILLISECONDS.toNanos(limits.requestTimeoutMs()));
            if (open.size() >= limits.maxConnections() && !makeRoomFor(k)) {
                refused.incrementAndGet();
                k.state.set(Conn.EVICTED);
                refuse(k, "Service Unavailable: every connection is processing a request; retry");
            } else {
                open.put(c, k);
            }
            if (closed) {
                closeQuietly(c);
                return;
            }
            Thread t = Thread.ofVirtual().name("mooncake-bootstrap-http-" + conn.getAndIncrement()).unstarted(() -> {
                try {
                    serve(k);
                } finally {
                    open.remove(c);
                    closing.remove(c);
                    closeQuietly(c);
                    serving.remove(Thread.currentThread());
                }
            });
            serving.add(t);
            t.start();
        }
    }

    /**
     * At the cap: closes an answered connection that is only draining, or else evicts (with a 503)
     * the oldest connection still sending its request from the peer address that holds the most of
     * them, the newcomer's address counted too, so that one address cannot push others out.
     * Connections processing a request are never chosen.
     *
     * @return whether room was made; false when every open connection is processing a request
     */
    private boolean makeRoomFor(Conn newcomer) {
        Conn answered = null;
        Map<java.net.InetAddress, Integer> reading = new java.util.HashMap<>();
        Map<java.net.InetAddress, Conn> oldest = new java.util.HashMap<>();
        for (Conn k : open.values()) {
            int st = k.state.get();
            if (st == Conn.ANSWERED && (answered == null || k.seq < answered.seq)) {
                answered = k;
            } else if (st == Conn.READING) {
                reading.merge(k.peer, 1, Integer::sum);
                oldest.merge(k.peer, k, (a, b) -> a.seq <= b.seq ? a : b);
            }
        }
        if (answered != null && open.remove(answered.socket) != null) {
            evicted.incrementAndGet();
            closeQuietly(answered.socket);
            return true;
        }
        reading.merge(newcomer.peer, 1, Integer::sum);
        while (!reading.isEmpty()) {
            java.net.InetAddress most = null;
            for (Map.Entry<java.net.InetAddress, Integer> e : reading.entrySet()) {
                if (oldest.containsKey(e.getKey()) && (most == null || e.getValue() > reading.get(most))) {
                    most = e.getKey();
                }
            }
            if (most == null) {
                return false;
            }
            Conn victim = oldest.remove(most);
            reading.remove(most);
            if (victim.state.compareAndSet(Conn.READING, Conn.EVICTED) && open.remove(victim.socket) != null) {
                evicted.incrementAndGet();
                refuse(victim, "Service Unavailable: too many connections (MOONCAKE4J_BOOTSTRAP_MAX_CONNECTIONS); "
                        + "this one was the oldest still sending its request");
                return true;
            }
        }
        return false;
    }

    /**
     * Answers an evicted or refused connection 503 (a small write to a connection that was sent
     * nothing yet: it does not block) and gives it 1 s to read it before the reaper closes it.
     */
    private void refuse(Conn k, String why) {
        k.deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        // at most 64 or 4 x the cap linger; beyond that the 503 is written and the socket closed at once
        boolean linger = closing.size() < Math.max(64, 4L * limits.maxConnections());
        if (linger) {
            closing.put(k.socket, k);
        }
        try {
            write(k.socket.getOutputStream(), detail(503, why), "");
            k.socket.shutdownOutput();
        } catch (IOException e) {
            linger = false;
        }
        if (!linger) {
            closing.remove(k.socket);
            closeQuietly(k.socket);
        }
    }

    /** Closes connections past their deadline, whatever their thread is blocked on (read or write). */
    private void reapLoop() {
        long period = TimeUnit.MILLISECONDS.toNanos(Math.max(10, Math.min(250, limits.requestTimeoutMs() / 4)));
        while (!closed) {
            long now = System.nanoTime();
            for (Conn k : open.values()) {
                if (now - k.deadline >= 0 && open.remove(k.socket) != null) {
                    expired.incrementAndGet();
                    closeQuietly(k.socket);
                }
            }
            for (Conn k : closing.values()) {
                if (now - k.deadline >= 0 && closing.remove(k.socket) != null) {
                    closeQuietly(k.socket);
                }
            }
            LockSupport.parkNanos(this, period);
        }
    }

    private void serve(Conn k) {
        Socket c = k.socket;
        try {
            c.setSoTimeout(limits.requestTimeoutMs());
            c.setTcpNoDelay(true);
            InputStream in = c.getInputStream();
            if (k.state.get() == Conn.EVICTED) {
                drain(c, in); // refused at accept: the 503 is written
                return;
            }
            OutputStream out = c.getOutputStream();
            Request req;
            Response r;
            try {
                req = readHead(in, limits.maxHeaderBytes());
                r = req.error() != null ? (k.begin() ? req.error() : null) : respond(k, req, in, out);
            } catch (EOFException e) {
                return; // closed before a whole request head: nothing to answer
            }
            if (r == null) {
                drain(c, in); // evicted while it was sending: the acceptor answered 503
                return;
            }
            write(out, r, req.path());
            c.shutdownOutput();
            k.state.set(Conn.ANSWERED);
            drain(c, in);
        } catch (IOException e) {
            if (!closed) {
                LOG.debug("Mooncake bootstrap connection {} ended: {}", c.getRemoteSocketAddress(), e.toString());
            }
        } catch (RuntimeException | LinkageError e) {
            LOG.error("Mooncake bootstrap server failed on a connection from {}; it keeps serving others",
                    c.getRemoteSocketAddress(), e);
        }
    }

    /**
     * After the answer: discards what the client still sends (an unread body) until it closes, for
     * at most 1 s and 2 MiB, so that the kernel does not reset the connection before the client read
     * the answer.
     */
    private static void drain(Socket c, InputStream in) {
        try {
            c.setSoTimeout(1000);
            byte[] sink = new byte[8192];
            long left = 2L << 20;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            int n;
            while (left > 0 && System.nanoTime() < deadline && (n = in.read(sink)) >= 0) {
                left -= n;
            }
        } catch (IOException e) {
            LOG.trace("drain: {}", e.getMessage());
        }
    }

    // ------------------------------------------------------------------ HTTP

    private Response respond(Conn k, Request req, InputStream in, OutputStream out) throws IOException {
        Response r;
        try {
            r = route(k, req, in, out);
        } catch (IOException e) {
            throw e;
        } catch (RuntimeException | StackOverflowError | LinkageError e) {
            LOG.error("Mooncake bootstrap server failed on {} {}", req.method(), req.path(), e);
            r = detail(500, "Internal Server Error");
        }
        return r;
    }

    private Response route(Conn k, Request req, InputStream in, OutputStream out) throws IOException {
        String path = req.path();
        String method = req.method();
        switch (path) {
            case "/register" -> {
                if (!method.equals("POST")) {
                    return k.begin() ? detail(405, "Method Not Allowed") : null;
                }
                if (req.contentLength() > limits.maxBodyBytes()) {
                    return k.begin() ? detail(413, "Request body larger than " + limits.maxBodyBytes() + " bytes")
                            : null;
                }
                if (req.expectContinue() && req.contentLength() > 0) {
                    out.write("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
                    out.flush();
                }
                byte[] body = req.contentLength() < 0 ? new byte[0] : in.readNBytes((int) req.contentLength());
                if (body.length < req.contentLength()) {
                    throw new EOFException("closed inside the request body");
                }
                return k.begin() ? register(new String(body, StandardCharsets.UTF_8)) : null;
            }
            case "/query" -> {
                if (!k.begin()) {
                    return null;
                }
                if (!method.equals("GET")) {
                    return detail(405, "Method Not Allowed");
                }
                return new Response(200, queryJson());
            }
            default -> {
                return k.begin() ? detail(404, "Not Found") : null;
            }
        }
    }

    private Map<String, Object> queryJson() {
        synchronized (lock) {
            Map<String, Object> out = new LinkedHashMap<>();
            workers.forEach((dp, e) -> {
                Map<String, Object> tps = new LinkedHashMap<>();
                e.workerAddr.forEach((tp, pps) -> {
                    Map<String, Object> ppm = new LinkedHashMap<>();
                    pps.forEach((pp, a) -> ppm.put(Integer.toString(pp), a));
                    tps.put(Integer.toString(tp), ppm);
                });
                Map<String, Object> entry = new LinkedHashMap<>();
                entry.put("engine_id", e.engineId);
                entry.put("worker_addr", tps);
                if (e.kvLayout != null) { // mooncake4j's extension: vLLM's D reads only the two keys above
                    entry.put(RegisterWorkerPayload.KV_LAYOUT_KEY, e.kvLayout);
                }
                out.put(Integer.toString(dp), entry);
            });
            return out;
        }
    }

    /** Handles a {@code /register} body; public for tests of the validation rules through HTTP only. */
    private Response register(String body) {
        Object parsed;
        if (body.isBlank()) {
            return validation(List.of(RegisterFieldErrors.error("missing", List.of("body"), "Field required", null)));
        }
        try {
            parsed = Json.parse(body);
        } catch (JsonException e) {
            Map<String, Object> err = RegisterFieldErrors.error("json_invalid", List.of("body", 0L), "JSON decode error", Map.of());
            err.put("ctx", Map.of("error", e.getMessage()));
            return validation(List.of(err));
        }
        if (!(parsed instanceof Map<?, ?> obj)) {
            return validation(List.of(RegisterFieldErrors.error("model_attributes_type", List.of("body"),
                    "Input should be a valid dictionary or object to extract fields from", parsed)));
        }
        List<Map<String, Object>> errors = new ArrayList<>();
        String engineId = RegisterFieldErrors.str(obj, "engine_id", errors);
        Integer dp = RegisterFieldErrors.integer(obj, "dp_rank", errors);
        Integer tp = RegisterFieldErrors.integer(obj, "tp_rank", errors);
        Integer pp = RegisterFieldErrors.integer(obj, "pp_rank", errors);
        String addr = RegisterFieldErrors.str(obj, "addr", errors);
        String kvLayout = obj.containsKey(RegisterWorkerPayload.KV_LAYOUT_KEY)
                ? RegisterFieldErrors.str(obj, RegisterWorkerPayload.KV_LAYOUT_KEY, errors) : null;
        if (!errors.isEmpty()) {
            return validation(errors);
        }
        synchronized (lock) {
            MutableEntry existing = workers.get(dp);
            if (existing == null && workers.size() >= limits.maxEngines()) {
                return detail(400, String.format(Locale.ROOT, "Registration table full: %d engines (dp ranks) are "
                        + "registered, the limit (MOONCAKE4J_BOOTSTRAP_MAX_ENGINES)", workers.size()));
            }
            if (existing != null && !existing.engineId.equals(engineId)) {
                return detail(400, String.format(Locale.ROOT, "Engine ID mismatch for dp_rank=%d: expected %s, got %s",
                        dp, existing.engineId, engineId));
            }
            boolean fresh = existing == null || existing.workerAddr.get(tp) == null
                    || !existing.workerAddr.get(tp).containsKey(pp);
            if (fresh && existing != null && workersOf(existing) >= limits.maxWorkersPerEngine()) {
                return detail(400, String.format(Locale.ROOT, "Registration table full: dp_rank=%d has %d workers, "
                        + "the limit (MOONCAKE4J_BOOTSTRAP_MAX_WORKERS_PER_ENGINE)", dp, workersOf(existing)));
            }
            if (fresh && workerCount >= limits.maxWorkers()) {
                return detail(400, String.format(Locale.ROOT, "Registration table full: %d workers are registered, "
                        + "the limit (MOONCAKE4J_BOOTSTRAP_MAX_WORKERS)", workerCount));
            }
            MutableEntry entry = workers.computeIfAbsent(dp, k -> new MutableEntry(engineId));
            if (!entry.engineId.equals(engineId)) {
                return detail(400, String.format(Locale.ROOT, "Engine ID mismatch for dp_rank=%d: expected %s, got %s",
                        dp, entry.engineId, engineId));
            }
            if (kvLayout != null && entry.kvLayout != null && !entry.kvLayout.equals(kvLayout)) {
                return detail(400, String.format(Locale.ROOT, "KV layout mismatch for dp_rank=%d: expected %s, got %s",
                        dp, entry.kvLayout, kvLayout));
            }
            Map<Integer, String> tpEntry = entry.workerAddr.computeIfAbsent(tp, k -> new LinkedHashMap<>());
            String old = tpEntry.get(pp);
            if (old != null) {
                return detail(400, String.format(Locale.ROOT,
                        "Worker with dp_rank=%d, tp_rank=%d, pp_rank=%d is already registered at %s, "
                                + "but still want to register at %s", dp, tp, pp, old, addr));
            }
            tpEntry.put(pp, addr);
            if (entry.kvLayout == null) {
                entry.kvLayout = kvLayout;
            }
            workerCount++;
        }
        LOG.debug("Registered Mooncake worker engine_id={} dp_rank={} tp_rank={} pp_rank={} addr={}",
                engineId, dp, tp, pp, addr);
        Map<String, Object> ok = new LinkedHashMap<>();
        ok.put("status", "ok");
        return new Response(200, ok);
    }

    private static int workersOf(MutableEntry e) {
        int n = 0;
        for (Map<Integer, String> pps : e.workerAddr.values()) {
            n += pps.size();
        }
        return n;
    }

    private static Response validation(List<Map<String, Object>> errors) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("detail", errors);
        return new Response(422, m);
    }
}
