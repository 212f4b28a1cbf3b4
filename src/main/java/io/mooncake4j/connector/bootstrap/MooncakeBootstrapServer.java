package io.mooncake4j.connector.bootstrap;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 *   <li>Other paths: 404 {@code {"detail":"Not Found"}}; other methods: 405 {@code {"detail":"Method Not Allowed"}}.</li>
 * </ul>
 * Hardening beyond vLLM: request bodies over {@value #MAX_BODY_BYTES} bytes get 413.
 *
 * <h2>Lifecycle and threads</h2>
 * The constructor binds nothing; {@link #start()} binds {@code host:port} (port 0: any free port,
 * see {@link #port()}) and is idempotent; {@link #close()} stops the server and its
 * {@value #THREADS} handler threads ({@code mooncake-bootstrap-http-<n>}) and is idempotent.
 * The registry is guarded by this object's lock; all methods are thread-safe.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py</a>
 */
public final class MooncakeBootstrapServer implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeBootstrapServer.class);
    private static final AtomicInteger THREAD_IDS = new AtomicInteger();

    /** Default bind host of vLLM's bootstrap server. */
    public static final String DEFAULT_HOST = "0.0.0.0";
    static final int THREADS = 2;
    static final int MAX_BODY_BYTES = 1 << 20;

    private final String host;
    private final int requestedPort;
    private final Object lock = new Object();
    /** dp_rank → entry; guarded by {@link #lock}. */
    private final Map<Integer, MutableEntry> workers = new LinkedHashMap<>();
    private HttpServer server; // guarded by lock
    private ExecutorService executor; // guarded by lock
    private boolean closed; // guarded by lock

    private static final class MutableEntry {
        final String engineId;
        final Map<Integer, Map<Integer, String>> workerAddr = new LinkedHashMap<>();

        MutableEntry(String engineId) {
            this.engineId = engineId;
        }
    }

    /**
     * A server for {@code host:port} (not yet started).
     *
     * @param host bind address, e.g. {@value #DEFAULT_HOST} or {@code 127.0.0.1}
     * @param port TCP port, 0 for any free port
     */
    public MooncakeBootstrapServer(String host, int port) {
        this.host = Objects.requireNonNull(host, "host");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be in 0..65535, got " + port);
        }
        this.requestedPort = port;
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
            if (server != null) {
                return;
            }
            HttpServer s;
            try {
                s = HttpServer.create(new InetSocketAddress(host, requestedPort), 64);
            } catch (IOException e) {
                throw new ConnectorException(String.format(Locale.ROOT,
                        "Cannot bind the Mooncake bootstrap server to %s:%d (%s); is another server using the port? "
                                + "Set VLLM_MOONCAKE_BOOTSTRAP_PORT to a free port.", host, requestedPort, e.getMessage()), e);
            }
            ThreadFactory tf = r -> {
                Thread t = new Thread(r, "mooncake-bootstrap-http-" + THREAD_IDS.getAndIncrement());
                t.setDaemon(true);
                return t;
            };
            executor = Executors.newFixedThreadPool(THREADS, tf);
            s.setExecutor(executor);
            s.createContext("/", this::handle);
            s.start();
            server = s;
            LOG.info("Mooncake bootstrap server listening on {}:{}", host, s.getAddress().getPort());
        }
    }

    /** The bound port (useful with port 0); -1 before {@link #start()}. */
    public int port() {
        synchronized (lock) {
            return server == null ? -1 : server.getAddress().getPort();
        }
    }

    /** The bind host given to the constructor. */
    public String host() {
        return host;
    }

    /** Whether {@link #start()} ran and {@link #close()} did not. */
    public boolean isRunning() {
        synchronized (lock) {
            return server != null && !closed;
        }
    }

    /** A snapshot of the registry, as {@code GET /query} would return it. */
    public BootstrapQueryResult workers() {
        synchronized (lock) {
            Map<Integer, EngineEntry> out = new LinkedHashMap<>();
            workers.forEach((dp, e) -> out.put(dp, new EngineEntry(e.engineId, e.workerAddr)));
            return new BootstrapQueryResult(out);
        }
    }

    /** vLLM's {@code shutdown()}: stops serving and the handler threads; idempotent. */
    @Override
    public void close() {
        HttpServer s;
        ExecutorService ex;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            s = server;
            ex = executor;
        }
        if (s != null) {
            s.stop(0);
        }
        if (ex != null) {
            ex.shutdownNow();
            try {
                if (!ex.awaitTermination(5, TimeUnit.SECONDS)) {
                    LOG.warn("Mooncake bootstrap server threads did not stop within 5 s");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        LOG.debug("Mooncake bootstrap server on {} stopped", host);
    }

    // ------------------------------------------------------------------ HTTP

    private record Response(int status, Object body) {
    }

    private void handle(HttpExchange ex) throws IOException {
        try (ex) {
            Response r;
            try {
                r = route(ex);
            } catch (RuntimeException e) {
                LOG.error("Mooncake bootstrap server failed on {} {}", ex.getRequestMethod(), ex.getRequestURI(), e);
                r = new Response(500, "Internal Server Error");
            }
            byte[] out = (r.body instanceof String s && r.status == 500)
                    ? s.getBytes(StandardCharsets.UTF_8)
                    : Json.write(r.body).getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", r.status == 500 ? "text/plain; charset=utf-8" : "application/json");
            if (r.status == 405) {
                ex.getResponseHeaders().set("Allow", ex.getRequestURI().getPath().equals("/register") ? "POST" : "GET");
            }
            ex.sendResponseHeaders(r.status, out.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(out);
            }
        }
    }

    private Response route(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getPath();
        String method = ex.getRequestMethod();
        switch (path) {
            case "/register" -> {
                if (!method.equals("POST")) {
                    return detail(405, "Method Not Allowed");
                }
                byte[] body = readBody(ex.getRequestBody());
                if (body == null) {
                    return detail(413, "Request body larger than " + MAX_BODY_BYTES + " bytes");
                }
                return register(new String(body, StandardCharsets.UTF_8));
            }
            case "/query" -> {
                if (!method.equals("GET")) {
                    return detail(405, "Method Not Allowed");
                }
                return new Response(200, queryJson());
            }
            default -> {
                return detail(404, "Not Found");
            }
        }
    }

    private static Response detail(int status, String msg) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("detail", msg);
        return new Response(status, m);
    }

    private static byte[] readBody(InputStream in) throws IOException {
        byte[] b = in.readNBytes(MAX_BODY_BYTES + 1);
        return b.length > MAX_BODY_BYTES ? null : b;
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
                out.put(Integer.toString(dp), entry);
            });
            return out;
        }
    }

    /** Handles a {@code /register} body; public for tests of the validation rules through HTTP only. */
    private Response register(String body) {
        Object parsed;
        if (body.isBlank()) {
            return validation(List.of(error("missing", List.of("body"), "Field required", null)));
        }
        try {
            parsed = Json.parse(body);
        } catch (JsonException e) {
            Map<String, Object> err = error("json_invalid", List.of("body", 0L), "JSON decode error", Map.of());
            err.put("ctx", Map.of("error", e.getMessage()));
            return validation(List.of(err));
        }
        if (!(parsed instanceof Map<?, ?> obj)) {
            return validation(List.of(error("model_attributes_type", List.of("body"),
                    "Input should be a valid dictionary or object to extract fields from", parsed)));
        }
        List<Map<String, Object>> errors = new ArrayList<>();
        String engineId = str(obj, "engine_id", errors);
        Integer dp = integer(obj, "dp_rank", errors);
        Integer tp = integer(obj, "tp_rank", errors);
        Integer pp = integer(obj, "pp_rank", errors);
        String addr = str(obj, "addr", errors);
        if (!errors.isEmpty()) {
            return validation(errors);
        }
        synchronized (lock) {
            MutableEntry entry = workers.computeIfAbsent(dp, k -> new MutableEntry(engineId));
            if (!entry.engineId.equals(engineId)) {
                return detail(400, String.format(Locale.ROOT, "Engine ID mismatch for dp_rank=%d: expected %s, got %s",
                        dp, entry.engineId, engineId));
            }
            Map<Integer, String> tpEntry = entry.workerAddr.computeIfAbsent(tp, k -> new LinkedHashMap<>());
            String old = tpEntry.get(pp);
            if (old != null) {
                return detail(400, String.format(Locale.ROOT,
                        "Worker with dp_rank=%d, tp_rank=%d, pp_rank=%d is already registered at %s, "
                                + "but still want to register at %s", dp, tp, pp, old, addr));
            }
            tpEntry.put(pp, addr);
        }
        LOG.debug("Registered Mooncake worker engine_id={} dp_rank={} tp_rank={} pp_rank={} addr={}",
                engineId, dp, tp, pp, addr);
        Map<String, Object> ok = new LinkedHashMap<>();
        ok.put("status", "ok");
        return new Response(200, ok);
    }

    private static Response validation(List<Map<String, Object>> errors) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("detail", errors);
        return new Response(422, m);
    }

    private static Map<String, Object> error(String type, List<Object> loc, String msg, Object input) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("type", type);
        e.put("loc", loc);
        e.put("msg", msg);
        e.put("input", input);
        return e;
    }

    private static String str(Map<?, ?> obj, String key, List<Map<String, Object>> errors) {
        if (!obj.containsKey(key)) {
            errors.add(error("missing", List.of("body", key), "Field required", obj));
            return null;
        }
        Object v = obj.get(key);
        if (v instanceof String s) {
            return s;
        }
        errors.add(error("string_type", List.of("body", key), "Input should be a valid string", v));
        return null;
    }

    private static Integer integer(Map<?, ?> obj, String key, List<Map<String, Object>> errors) {
        if (!obj.containsKey(key)) {
            errors.add(error("missing", List.of("body", key), "Field required", obj));
            return null;
        }
        Object v = obj.get(key);
        List<Object> loc = List.of("body", key);
        if (v instanceof Long l) {
            return inIntRange(l, v, loc, errors);
        }
        if (v instanceof BigInteger) {
            errors.add(error("int_type", loc, "Input should be a valid integer (mooncake4j accepts 32-bit ranks)", v));
            return null;
        }
        if (v instanceof Boolean b) {
            return b ? 1 : 0;
        }
        if (v instanceof Double d) {
            if (d == Math.rint(d) && !Double.isInfinite(d)) {
                return inIntRange((long) (double) d, v, loc, errors);
            }
            errors.add(error("int_from_float", loc,
                    "Input should be a valid integer, got a number with a fractional part", v));
            return null;
        }
        if (v instanceof String s) {
            try {
                return inIntRange(Long.parseLong(s.strip()), v, loc, errors);
            } catch (NumberFormatException e) {
                errors.add(error("int_parsing", loc,
                        "Input should be a valid integer, unable to parse string as an integer", v));
                return null;
            }
        }
        errors.add(error("int_type", loc, "Input should be a valid integer", v));
        return null;
    }

    private static Integer inIntRange(long l, Object v, List<Object> loc, List<Map<String, Object>> errors) {
        if (l < Integer.MIN_VALUE || l > Integer.MAX_VALUE) {
            errors.add(error("int_type", loc, "Input should be a valid integer (mooncake4j accepts 32-bit ranks)", v));
            return null;
        }
        return (int) l;
    }
}
