package io.mooncake4j.proxy;

import io.mooncake4j.http.Exchange;
import io.mooncake4j.http.FairSlots;
import io.mooncake4j.http.HttpFront;
import io.mooncake4j.http.Routes;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.ClientWatch;
import io.mooncake4j.internal.json.JsonException;
import io.mooncake4j.proxy.ClientAnswers.Failure;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import static io.mooncake4j.proxy.ClientAnswers.drain;
import static io.mooncake4j.proxy.ClientAnswers.relay;
import static io.mooncake4j.proxy.ClientAnswers.sendError;
import static io.mooncake4j.proxy.ClientAnswers.sendJson;
import static io.mooncake4j.proxy.ClientAnswers.nodeFailure;
import static io.mooncake4j.proxy.ClientAnswers.sendFailure;
import static io.mooncake4j.proxy.NodeCalls.cancel;
import static io.mooncake4j.proxy.NodeCalls.describe;
import static io.mooncake4j.proxy.NodeCalls.failedOrError;
import static io.mooncake4j.proxy.NodeCalls.readBounded;
import static io.mooncake4j.proxy.NodeCalls.remaining;
import static io.mooncake4j.proxy.NodeCalls.unreachable;
import static io.mooncake4j.proxy.NodeCalls.unwrap;

/**
 * The disaggregated-serving router of {@code bin/mooncake4j proxy}: the HTTP contract of vLLM's
 * example Mooncake proxy ({@code examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py})
 * in front of P and D nodes that speak vLLM's OpenAI-compatible API — ours ({@code bin/mooncake4j serve})
 * or vLLM's.
 *
 * <p>For each {@code POST /v1/completions} or {@code /v1/chat/completions} it picks the next P data-parallel
 * rank and the next D (round robin over the nodes that are up, XpYd), makes one
 * {@code transfer_id = "xfer-<request id>"}, and sends <em>at the same time</em>
 * <ul>
 *   <li>to P: the body with {@code kv_transfer_params = {do_remote_decode: true, do_remote_prefill: false,
 *       transfer_id}}, {@code stream: false}, {@code max_tokens: 1} (and {@code max_completion_tokens: 1}
 *       when present), without {@code stream_options}, header {@code X-data-parallel-rank};</li>
 *   <li>to D: the body unchanged but for {@code kv_transfer_params = {do_remote_decode: false,
 *       do_remote_prefill: true, remote_bootstrap_addr, remote_engine_id, transfer_id}}, where the engine id
 *       is what P's bootstrap server lists for that DP rank.</li>
 * </ul>
 * D's answer goes to the client as it arrives (server-sent events pass through chunk by chunk).
 *
 * <p>Differences from the example, on purpose: a P or D that fails (refused connection, reset, error
 * status, bad stream) gives the client an OpenAI-style JSON error ({@code {"error": {"message", "type",
 * "param", "code"}}}) naming the node — the node's own 4xx is passed on with its status, anything else
 * becomes 502 (504 on timeout) — and the other side of that request is cancelled; a node that cannot be
 * reached is taken out of the rotation until its probes succeed again (a P is re-queried for its engine
 * ids, which change when it restarts), and so is one whose {@code /health} probe (every probe interval,
 * every node) is refused or answers 503, as a draining {@code serve} node does; a D stream that breaks
 * after its first bytes ends with an SSE {@code data: {"error": ...}} event and no {@code [DONE]}. Until every P has answered {@code /health}
 * and listed at least one engine on its bootstrap {@code /query}, requests get 503. A client that goes
 * away before its answer is complete (its connection closed or reset, seen in the kernel's TCP table by a
 * {@link ClientWatch}, or a failed write) cancels both node requests, so the nodes abort them.
 *
 * <p>Other routes: {@code GET /health} (200 when ready, else 503; the body lists each node's state),
 * {@code GET /v1/models} (forwarded to a D).
 *
 * <p>Bounds: a client body is read under a body-upload slot shared by client address (a slow upload
 * holds one of its own address's share, and is cut by the front's minimum rate), and only a request
 * whose body has arrived takes one of the {@code --max-in-flight} slots (also shared by address when
 * {@link io.mooncake4j.http.HttpLimits#inFlightPerClient()} is set).
 *
 * <p><b>Threads and ownership:</b> one virtual thread per client request ({@link HttpFront}, {@code mooncake-proxy-http-<n>-<m>}),
 * one virtual thread per call to a P or D ({@link Http1Client}, {@code mooncake-proxy-client-<n>-<m>}), one virtual prober thread
 * {@code mooncake-proxy-probe-<n>} and one disconnect watcher {@code mooncake-proxy-disconnect-<n>}. Node state is held in volatile fields written by the prober and by
 * request threads that see a node fail. {@link #close()} stops accepting, then stops the prober.
 */
public final class DisaggProxy implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(DisaggProxy.class);
    private static final AtomicLong IDS = new AtomicLong();
    /** Bound on an error or non-streamed body read from a node. */
    static final int MAX_NODE_BODY = 64 << 20;
    /** How long a request waits for a body-upload slot before its 503. */
    private static final Duration BODY_SLOT_WAIT = Duration.ofSeconds(10);

    private final ProxyConfig config;
    private final List<Prefill> prefills = new ArrayList<>();
    private final List<Decode> decodes = new ArrayList<>();
    private final Http1Client http;
    private final ClientWatch clientWatch;
    private final HttpFront server;
    private final Thread prober;
    private final FairSlots inFlight;
    /** The routes; a proxied request's body is read under a slot of the client's share (see {@link Routes}). */
    private final Routes routes;
    private final AtomicLong prefillTurn = new AtomicLong();
    private final AtomicLong decodeTurn = new AtomicLong();
    private final Object probeLock = new Object();
    private final ProxyStats stats = new ProxyStats();
    private volatile boolean ready;
    private volatile boolean closed;

    /** Per-P state. {@code dpEngineIds} is replaced as a whole (volatile publication of an immutable map). */
    private static final class Prefill {
        final ProxyConfig.PrefillNode node;
        volatile boolean up;
        volatile Map<Integer, String> dpEngineIds = Map.of();
        volatile String problem = "not probed yet";

        Prefill(ProxyConfig.PrefillNode node) {
            this.node = node;
        }
    }

    private static final class Decode {
        final ProxyConfig.DecodeNode node;
        volatile boolean up = true;
        volatile String problem = "";

        Decode(ProxyConfig.DecodeNode node) {
            this.node = node;
        }
    }

    private DisaggProxy(ProxyConfig config) throws IOException {
        this.config = config;
        config.prefill().forEach(p -> prefills.add(new Prefill(p)));
        config.decode().forEach(d -> decodes.add(new Decode(d)));
        this.inFlight = new FairSlots(config.maxInFlight(), config.http().inFlightShare(config.maxInFlight()),
                config.http()::network);
        this.routes = Routes.builder(config.http(), config.maxBodyBytes(), this::refusal, DisaggProxy::unmatched)
                .slotWait(BODY_SLOT_WAIT)
                .failures(this::failed)
                .withoutBody("GET", "/health", this::health)
                .withoutBody("GET", "/v1/models", this::models)
                .withBody("POST", "/v1/completions", config.maxBodyBytes(), this::admitWhenReady,
                        (ex, body) -> proxy(ex, "/v1/completions", body))
                .withBody("POST", "/v1/chat/completions", config.maxBodyBytes(), this::admitWhenReady,
                        (ex, body) -> proxy(ex, "/v1/chat/completions", body))
                .build();
        long id = IDS.getAndIncrement();
        this.http = new Http1Client(Http1Client.Limits.defaults(config.probeTimeout()),
                Thread.ofVirtual().name("mooncake-proxy-client-" + id + "-", 0).factory());
        this.clientWatch = new ClientWatch(Duration.ofSeconds(1), Duration.ofSeconds(3), "mooncake-proxy-disconnect-" + id);
        try {
            // requests before the prober has run get 503 (not ready)
            this.server = HttpFront.start("mooncake-proxy-http-" + id + "-", config.host(), config.port(), 1024,
                    config.http(), routes);
        } catch (IOException e) {
            http.close();
            clientWatch.close();
            throw new IOException(String.format(Locale.ROOT, "cannot listen on %s:%d (%s); is the port in use?",
                    config.host(), config.port(), e.getMessage()), e);
        }
        this.prober = Thread.ofVirtual().name("mooncake-proxy-probe-" + id).unstarted(this::probeLoop);
    }

    /**
     * Starts a proxy: binds {@code config.host():config.port()} and begins probing the P nodes.
     *
     * @throws IOException when the address cannot be bound
     */
    public static DisaggProxy start(ProxyConfig config) throws IOException {
        DisaggProxy p = new DisaggProxy(Objects.requireNonNull(config, "config"));
        p.prober.start();
        LOG.info("proxy listening on {}:{}, {} prefill node(s) {}, {} decode node(s) {}", config.host(),
                p.port(), config.prefill().size(), config.prefill(), config.decode().size(), config.decode());
        return p;
    }

    /** The port it listens on. */
    public int port() {
        return server.port();
    }

    /** Whether every P has been seen healthy with its engines listed (requests before that get 503). */
    public boolean isReady() {
        return ready;
    }

    public ProxyStats stats() {
        return stats;
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        server.close();
        synchronized (probeLock) {
            probeLock.notifyAll();
        }
        try {
            prober.join(Duration.ofSeconds(10));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        http.close();
        clientWatch.close();
        LOG.info("proxy on port {} closed: {}", port(), stats.asMap());
    }

    // ---------------------------------------------------------------- probing

    private void probeLoop() {
        while (!closed) {
            try {
                probeOnce();
            } catch (RuntimeException e) {
                LOG.error("proxy prober failed; retrying in {}", config.probeInterval(), e);
            }
            synchronized (probeLock) {
                if (closed) {
                    return;
                }
                try {
                    probeLock.wait(config.probeInterval().toMillis());
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    private void probeOnce() {
        {
            boolean all = true;
            for (Prefill p : prefills) {
                if (!p.up) {
                    probePrefill(p);
                } else {
                    checkUp(p.node.url(), c -> markDown(p, c));
                }
                all &= p.up;
            }
            for (Decode d : decodes) {
                if (!d.up) {
                    probeDecode(d);
                } else {
                    checkUp(d.node.url(), c -> markDown(d, c));
                }
            }
            if (all && !ready) {
                ready = true;
                LOG.info("proxy ready: every prefill node is healthy and registered");
            }
        }
    }

    private void probePrefill(Prefill p) {
        try {
            int health = getStatus(p.node.url().resolve("/health"));
            if (health != 200) {
                p.problem = "GET /health answered " + health;
                return;
            }
            URI q = URI.create(p.node.bootstrapAddr() + "/query");
            String answer;
            try (Http1Client.Response r = http.send(get(q))) {
                if (r.statusCode() != 200) {
                    p.problem = "GET " + q + " answered " + r.statusCode();
                    return;
                }
                answer = r.bodyString(MAX_NODE_BODY);
            }
            Map<String, Object> body = Json.parseObject(answer);
            Map<Integer, String> ids = new TreeMap<>();
            for (Map.Entry<String, Object> e : body.entrySet()) {
                int rank;
                try {
                    rank = Integer.parseInt(e.getKey());
                } catch (NumberFormatException ex) {
                    throw new JsonException("dp rank '" + e.getKey() + "' is not an integer");
                }
                if (!(e.getValue() instanceof Map<?, ?> entry) || !(entry.get("engine_id") instanceof String eid)) {
                    throw new JsonException("dp rank " + rank + " has no string engine_id");
                }
                ids.put(rank, eid);
            }
            if (ids.isEmpty()) {
                p.problem = "bootstrap " + q + " lists no engine yet";
                return;
            }
            p.dpEngineIds = Map.copyOf(ids);
            p.problem = "";
            p.up = true;
            LOG.info("prefill node {} ready: dp_size={}, engine ids {}", p.node.url(), ids.size(), ids);
        } catch (IOException | IllegalArgumentException e) {
            p.problem = describe(e);
        }
    }

    private void probeDecode(Decode d) {
        try {
            int health = getStatus(d.node.url().resolve("/health"));
            if (health == 200) {
                d.up = true;
                d.problem = "";
                LOG.info("decode node {} is back", d.node.url());
            } else {
                d.problem = "GET /health answered " + health;
            }
        } catch (IOException e) {
            d.problem = describe(e);
        }
    }

    /**
     * Health check of a node in rotation: one that refuses or resets the connection, or answers 503 (a
     * draining {@code serve} node), leaves the rotation; a slow one stays (a timeout says nothing certain).
     */
    private void checkUp(URI url, java.util.function.Consumer<Throwable> down) {
        try {
            if (getStatus(url.resolve("/health")) == 503) {
                down.accept(new IOException("GET /health answered 503 (draining or stopped)"));
            }
        } catch (HttpTimeoutException slow) {
            // still in rotation
        } catch (IOException e) {
            down.accept(e);
        }
    }

    private Http1Client.Request get(URI uri) {
        return Http1Client.Request.get(uri, config.probeTimeout());
    }

    /** A GET's status; its body (bounded) is read and dropped so that the connection can be reused. */
    private int getStatus(URI uri) throws IOException {
        try (Http1Client.Response r = http.send(get(uri))) {
            r.bodyString(MAX_NODE_BODY);
            return r.statusCode();
        }
    }

    private void markDown(Prefill p, Throwable cause) {
        if (p.up) {
            p.up = false;
            p.problem = describe(cause);
            LOG.warn("prefill node {} taken out of rotation: {}", p.node.url(), p.problem);
            wakeProber();
        }
    }

    private void markDown(Decode d, Throwable cause) {
        if (d.up) {
            d.up = false;
            d.problem = describe(cause);
            LOG.warn("decode node {} taken out of rotation: {}", d.node.url(), d.problem);
            wakeProber();
        }
    }

    private void wakeProber() {
        synchronized (probeLock) {
            probeLock.notifyAll();
        }
    }

    // ---------------------------------------------------------------- routing

    private record Route(Prefill prefill, int dpRank, String engineId, Decode decode) {}

    /** The next P rank and D among those up, or null naming what is missing. */
    private Route nextRoute(StringBuilder why) {
        List<Route> ps = new ArrayList<>();
        for (Prefill p : prefills) {
            if (p.up) {
                p.dpEngineIds.forEach((rank, eid) -> ps.add(new Route(p, rank, eid, null)));
            }
        }
        List<Decode> ds = decodes.stream().filter(d -> d.up).toList();
        if (ps.isEmpty()) {
            why.append("no prefill node is reachable (").append(nodeProblems()).append(')');
            return null;
        }
        if (ds.isEmpty()) {
            why.append("no decode node is reachable (").append(nodeProblems()).append(')');
            return null;
        }
        Route p = ps.get((int) Math.floorMod(prefillTurn.getAndIncrement(), (long) ps.size()));
        Decode d = ds.get((int) Math.floorMod(decodeTurn.getAndIncrement(), (long) ds.size()));
        return new Route(p.prefill, p.dpRank, p.engineId, d);
    }

    private String nodeProblems() {
        List<String> out = new ArrayList<>();
        for (Prefill p : prefills) {
            if (!p.up) {
                out.add("prefill " + p.node.url() + ": " + p.problem);
            }
        }
        for (Decode d : decodes) {
            if (!d.up) {
                out.add("decode " + d.node.url() + ": " + d.problem);
            }
        }
        return String.join("; ", out);
    }

    // ---------------------------------------------------------------- HTTP

    /** The HTTP front door (its counters of slow clients cut off). */
    public HttpFront httpFront() {
        return server;
    }

    /** What a route threw: an I/O error is a client gone; else a 500 when nothing was answered yet. */
    private void failed(Exchange ex, Exception e) {
        if (e instanceof IOException) {
            LOG.debug("client connection failed: {}", e.toString()); // the client went away; nothing to answer
        } else {
            LOG.error("proxy handler failed on {} {}", ex.method(), ex.path(), e);
            try {
                sendError(ex, 500, "server_error", "proxy internal error: " + e);
            } catch (IOException | RuntimeException ignored) {
                // headers were already sent; the connection is closed by try-with-resources
            }
        }
    }

    private static void unmatched(Exchange ex, java.util.Set<String> allowed) throws IOException {
        if (allowed.isEmpty()) {
            sendError(ex, 404, "not_found_error", "no route " + ex.method() + " " + ex.path()
                    + " (the proxy serves GET /health, GET /v1/models, POST /v1/completions, "
                    + "POST /v1/chat/completions)");
        } else {
            sendError(ex, 405, "invalid_request_error", allowed.contains("POST") ? ex.path() + " takes POST"
                    : "GET only");
        }
    }

    /** The table's own answers (413, 503), counted as rejected. */
    private byte[] refusal(Exchange ex, Routes.Refusal r) {
        stats.rejected.incrementAndGet();
        Map<String, Object> body;
        if (r.reason() == Routes.Reason.TOO_LARGE) {
            body = ClientAnswers.errorBody(413, "invalid_request_error", "request body exceeds " + r.limit() + " bytes");
        } else {
            ex.setHeader("Retry-After", "1");
            body = ClientAnswers.errorBody(r.status(), "service_unavailable", r.message());
        }
        return Json.write(body).getBytes(StandardCharsets.UTF_8);
    }

    /** Before a body is read: requests before every P is ready get 503 (their body read away). */
    private boolean admitWhenReady(Exchange ex) throws IOException {
        if (ready) {
            return true;
        }
        stats.rejected.incrementAndGet();
        drain(ex, config.maxBodyBytes());
        sendError(ex, 503, "service_unavailable", "the proxy is not ready yet: waiting for " + nodeProblems());
        return false;
    }

    private void health(Exchange ex) throws IOException {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", ready ? "ready" : "waiting for prefill nodes");
        List<Object> ps = new ArrayList<>();
        for (Prefill p : prefills) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("url", p.node.url().toString());
            e.put("bootstrap_addr", p.node.bootstrapAddr());
            e.put("up", p.up);
            Map<String, Object> ids = new LinkedHashMap<>();
            p.dpEngineIds.forEach((k, v) -> ids.put(Integer.toString(k), v));
            e.put("dp_engine_ids", ids);
            e.put("problem", p.problem);
            ps.add(e);
        }
        List<Object> ds = new ArrayList<>();
        for (Decode d : decodes) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("url", d.node.url().toString());
            e.put("up", d.up);
            e.put("problem", d.problem);
            ds.add(e);
        }
        m.put("prefill", ps);
        m.put("decode", ds);
        m.put("stats", stats.asMap());
        sendJson(ex, ready ? 200 : 503, Json.write(m));
    }

    private void models(Exchange ex) throws IOException {
        Decode d = decodes.stream().filter(x -> x.up).findFirst().orElse(null);
        if (d == null) {
            sendError(ex, 503, "service_unavailable", "no decode node is reachable (" + nodeProblems() + ")");
            return;
        }
        try {
            Http1Client.Response r = http.send(get(d.node.url().resolve("/v1/models")));
            byte[] body = readBounded(r.body(), MAX_NODE_BODY);
            ex.setHeader("Content-Type", r.header("Content-Type").orElse("application/json"));
            ex.sendResponseHeaders(r.statusCode(), body.length == 0 ? -1 : body.length);
            ex.responseBody().write(body);
        } catch (IOException e) {
            markDown(d, e);
            sendError(ex, 502, "upstream_error", "decode node " + d.node.url() + " failed on GET /v1/models: "
                    + describe(e));
        }
    }

    private void proxy(Exchange ex, String path, byte[] raw) throws IOException {
        // the request's time runs from its arrival: the body's upload counts
        long deadline = ex.arrivedNanos() + config.requestTimeout().toNanos();
        InetAddress client = ex.clientAddress();
        FairSlots.Slot slot = inFlight.tryAcquire(client);
        if (slot == null) {
            stats.rejected.incrementAndGet();
            ex.setHeader("Retry-After", "1");
            sendError(ex, 503, "service_unavailable", inFlight.heldBy(client) >= inFlight.perClient()
                    && inFlight.perClient() < inFlight.total()
                    ? String.format(Locale.ROOT, "the proxy already handles %d requests from %s (its share of "
                            + "--max-in-flight); retry later", inFlight.heldBy(client), client.getHostAddress())
                    : String.format(Locale.ROOT, "the proxy already handles %d requests (its --max-in-flight); "
                            + "retry later", config.maxInFlight()));
            return;
        }
        try (slot) {
            proxyAdmitted(ex, path, raw, deadline);
        }
    }

    private void proxyAdmitted(Exchange ex, String path, byte[] raw, long deadline) throws IOException {
        Map<String, Object> req;
        try {
            req = Json.parseObject(new String(raw, StandardCharsets.UTF_8));
        } catch (JsonException e) {
            stats.rejected.incrementAndGet();
            sendError(ex, 400, "invalid_request_error", "request body is not a JSON object: " + e.getMessage());
            return;
        }
        StringBuilder why = new StringBuilder();
        Route route = nextRoute(why);
        if (route == null) {
            stats.rejected.incrementAndGet();
            sendError(ex, 503, "service_unavailable", why.toString());
            return;
        }
        stats.requests.incrementAndGet();
        // A request whose attempt failed before anything reached the client is tried once more: on another P
        // when P was to blame (it died between routing and answering, or under D's pull), on another D when
        // D was (and another P when one is up).
        Failure f = attempt(ex, path, req, route, deadline);
        if (f != null && f.retryable() && NodeCalls.remainingOrZero(deadline) > 0) {
            Route again = nextRouteAvoiding(route, f.role().equals("decode"));
            if (again != null) {
                stats.retried.incrementAndGet();
                LOG.info("request failed on {} before any token reached the client ({}); retrying on {} and {}",
                        f.failedNode(), f.message(), again.prefill.node.url(), again.decode.node.url());
                f = attempt(ex, path, req, again, deadline);
            }
        }
        if (f != null) {
            (f.role().equals("prefill") ? stats.failedPrefill : stats.failedDecode).incrementAndGet();
            sendFailure(ex, f);
        }
    }

    /**
     * The route of a retry after {@code failed}: another P, and when D was to blame another D too; when
     * D was to blame and no other P is up, the same P with another D. Null when no such route is up.
     */
    private Route nextRouteAvoiding(Route failed, boolean decodeToBlame) {
        Route fallback = null;
        for (int i = 0; i <= (prefills.size() + 1) * (decodes.size() + 1) * 4; i++) {
            Route r = nextRoute(new StringBuilder());
            if (r == null) {
                break;
            }
            boolean otherP = r.prefill != failed.prefill;
            boolean otherD = r.decode != failed.decode;
            if (otherP && (otherD || !decodeToBlame)) {
                return r;
            }
            if (fallback == null && decodeToBlame && otherD) {
                fallback = r;
            }
        }
        return fallback;
    }

    /**
     * One try of a request on {@code route}: null when it was answered (D's answer relayed, or an answer
     * that is final), else the failure, not sent yet, with the node to blame.
     */
    private Failure attempt(Exchange ex, String path, Map<String, Object> req, Route route, long deadline)
            throws IOException {
        String requestId = UUID.randomUUID().toString();
        String transferId = "xfer-" + requestId;
        boolean stream = Boolean.TRUE.equals(req.get("stream"));
        String auth = ex.header("Authorization");

        Map<String, Object> pBody = NodeCalls.prefillBody(req, transferId);
        Map<String, Object> dBody = NodeCalls.decodeBody(req, route.prefill.node.bootstrapAddr(), route.engineId,
                transferId);

        Map<String, String> pHeaders = new LinkedHashMap<>();
        Map<String, String> dHeaders = new LinkedHashMap<>();
        pHeaders.put("X-data-parallel-rank", Integer.toString(route.dpRank));
        if (auth != null) {
            pHeaders.put("Authorization", auth);
            dHeaders.put("Authorization", auth);
        }
        CompletableFuture<Http1Client.Response> pf = http.sendAsync(post(route.prefill.node.url().resolve(path), pBody,
                requestId, pHeaders));
        CompletableFuture<Http1Client.Response> df = http.sendAsync(post(route.decode.node.url().resolve(path), dBody,
                requestId, dHeaders));
        String pUrl = route.prefill.node.url().toString();
        String dUrl = route.decode.node.url().toString();
        String pName = "prefill node " + pUrl;
        String dName = "decode node " + dUrl;
        // a client that goes away cancels both halves: the nodes see their connections close and abort
        java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean();
        ClientWatch.Watch watch = clientWatch.watch(ex.localAddress(), ex.remoteAddress(), () -> {
            gone.set(true);
            stats.clientsGone.incrementAndGet();
            cancel(pf);
            cancel(df);
        });
        try (watch) {
            // Wait for P, unless D fails first (then P is cancelled and D's error is the answer).
            try {
                CompletableFuture.anyOf(pf, df).get(remaining(deadline), TimeUnit.NANOSECONDS);
            } catch (ExecutionException | CancellationException ignored) {
                // inspected below through the individual futures
            }
            if (!pf.isDone() && failedOrError(df)) {
                pf.cancel(true);
                return decodeFailure(df, route, dName, transferId);
            }
            Http1Client.Response pr;
            try {
                pr = pf.get(remaining(deadline), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                cancel(df);
                Throwable c = unwrap(e);
                if (unreachable(c)) {
                    markDown(route.prefill, c);
                }
                boolean timeout = c instanceof HttpTimeoutException;
                return new Failure(timeout ? 504 : 502, "upstream_error", String.format(Locale.ROOT,
                        "%s failed before prefill finished (%s); request %s was not decoded", pName, describe(c),
                        transferId), pUrl, "prefill", !timeout);
            }
            byte[] pAnswer = readBounded(pr.body(), MAX_NODE_BODY);
            if (pr.statusCode() / 100 != 2) {
                cancel(df);
                return nodeFailure(pr.statusCode(), pAnswer, pName, transferId, pUrl, "prefill");
            }
            Http1Client.Response dr;
            try {
                dr = df.get(remaining(deadline), TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                return decodeFailure(df, route, dName, transferId);
            }
            if (dr.statusCode() / 100 != 2) {
                return blame(nodeFailure(dr.statusCode(), readBounded(dr.body(), MAX_NODE_BODY), dName, transferId,
                        dUrl, "decode"), route);
            }
            Failure broken = relay(ex, dr, stream, dName, dUrl, transferId, deadline, stats);
            return broken == null ? null : blame(broken, route);
        } catch (TimeoutException e) {
            cancel(pf);
            cancel(df);
            return new Failure(504, "upstream_error", String.format(Locale.ROOT,
                    "request %s did not finish within %d s (%s, %s)", transferId, config.requestTimeout().toSeconds(),
                    pf.isDone() ? pName + " answered" : pName + " still pending",
                    df.isDone() ? dName + " answered" : dName + " still pending"),
                    pf.isDone() ? dUrl : pUrl, pf.isDone() ? "decode" : "prefill", false);
        } catch (NodeCalls.BodyTooLargeException e) {
            cancel(pf);
            cancel(df);
            return new Failure(502, "upstream_error", "a node's answer to request " + transferId + " exceeds "
                    + MAX_NODE_BODY + " bytes", pf.isDone() ? dUrl : pUrl, pf.isDone() ? "decode" : "prefill", false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            cancel(pf);
            cancel(df);
            sendError(ex, 503, "service_unavailable", "the proxy is shutting down");
            return null;
        } catch (CancellationException e) {
            if (!gone.get()) {
                throw e;
            }
            LOG.debug("request {}: the client went away; P's and D's requests were cancelled", transferId);
            return null;
        } finally {
            cancel(pf);
        }
    }

    /** D failed (an exception or an error status): the failure, blamed on P when P is the likely cause. */
    private Failure decodeFailure(CompletableFuture<Http1Client.Response> f, Route route, String name,
            String transferId) throws IOException {
        String url = route.decode.node.url().toString();
        try {
            Http1Client.Response r = f.getNow(null);
            return blame(nodeFailure(r.statusCode(), readBounded(r.body(), MAX_NODE_BODY), name, transferId, url,
                    "decode"), route);
        } catch (CompletionException | CancellationException e) {
            Throwable c = unwrap(e);
            if (unreachable(c)) {
                markDown(route.decode, c);
            }
            boolean timeout = c instanceof HttpTimeoutException;
            Failure failure = new Failure(timeout ? 504 : 502, "upstream_error", String.format(Locale.ROOT,
                    "%s failed (%s) on request %s", name, describe(c), transferId), url, "decode", !timeout);
            return timeout ? failure : blame(failure, route);
        }
    }

    /**
     * A D failure (not its own 4xx) whose P is out of rotation, or found gone now (a {@code GET /health}
     * that is refused or reset, or answered 503, within the probe timeout), is P's: D's pull from it failed
     * because P died — whatever D's message says, and before the prober has had its turn.
     */
    private Failure blame(Failure f, Route route) {
        if (!f.retryable()) {
            return f;
        }
        if (route.prefill.up) {
            checkUp(route.prefill.node.url(), c -> markDown(route.prefill, c));
        }
        if (route.prefill.up) {
            return f;
        }
        return new Failure(f.status(), f.type(), f.message() + " (prefill node " + route.prefill.node.url()
                + " is down: " + route.prefill.problem + ")", route.prefill.node.url().toString(), "prefill",
                f.retryable());
    }

    private Http1Client.Request post(URI uri, Map<String, Object> body, String requestId, Map<String, String> extra) {
        Map<String, String> h = new LinkedHashMap<>();
        h.put("Content-Type", "application/json");
        h.put("X-Request-Id", requestId);
        h.putAll(extra);
        return Http1Client.Request.post(uri, h, Json.write(body).getBytes(StandardCharsets.UTF_8),
                config.requestTimeout());
    }
}
