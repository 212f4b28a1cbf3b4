package io.mooncake4j.serve;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.http.Exchange;
import io.mooncake4j.http.HttpFront;
import io.mooncake4j.http.Routes;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.ClientWatch;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.KvLayouts;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimResult;
import io.mooncake4j.sim.SimWorker;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One serving node: a {@link SimEngine} (its TP workers, with the real Mooncake connector, and the
 * synthetic model in {@link SimEngine.Sampling#KV} mode) behind an HTTP server that speaks vLLM's
 * OpenAI-compatible contract as a node of a Mooncake P/D deployment (see the package description).
 *
 * <p>Lifecycle: {@link #start} allocates the KV caches, starts the workers (a P or {@code kv_both}
 * node's rank 0 also runs the bootstrap server) and the HTTP server; {@link #drain} stops taking
 * requests (503) and waits for the ones in flight and for the KV blocks P holds for decode nodes;
 * {@link #close} drains (bounded by {@link ServeOptions#drainTimeout}), stops the HTTP server and closes
 * the engine, which fails what is left, closes the workers (the bootstrap server with them) and frees
 * the KV memory.
 *
 * <p>Threads: HTTP exchanges run on virtual threads ({@code mooncake-serve-http-N}) of the node's
 * {@link HttpFront}; the engine's step loop is its own thread. Thread-safe.
 */
public final class ServeNode implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ServeNode.class);

    /** The largest request body read; larger ones get 413. */
    public static final int MAX_BODY_BYTES = 16 << 20;

    /** How long a request waits for a body-upload slot before its 503. */
    private static final Duration BODY_SLOT_WAIT = Duration.ofSeconds(10);

    /** How often the connections of requests in flight are checked for clients that went away. */
    static final Duration DISCONNECT_CHECK_PERIOD = Duration.ofSeconds(1);

    /** Requests younger than this are not checked (reading the kernel's TCP table costs CPU). */
    static final Duration DISCONNECT_CHECK_AFTER = Duration.ofSeconds(3);

    private static final AtomicLong NODES = new AtomicLong();

    private final ServeOptions options;
    private final SimEngine engine;
    /** The synthetic tokenizer, or the real model's ({@code serve --model DIR}). */
    private final TextModel text;
    /** The real model, closed with the node; null for a preset. */
    private final AutoCloseable ownedModel;
    /** The JSON answers and event streams of the completion routes. */
    private final CompletionAnswers answers;
    private volatile HttpFront server; // set once by start, before the node is returned
    private volatile MetricsRoute metrics = MetricsRoute.NONE;
    /** Each rank's transfer engine, for the bytes each transport carried; set once at start. */
    private volatile List<TransferEngine> transferEngines = List.of();
    private final long created = System.currentTimeMillis() / 1000;
    private final AtomicLong seq = new AtomicLong();
    private final AtomicLong requestsOk = new AtomicLong();
    private final AtomicLong requestsFailed = new AtomicLong();
    private final AtomicLong requestsAborted = new AtomicLong();
    private final ClientWatch clientWatch;
    /** Compares a prefill node's KV layout with this node's before a decode request is admitted. */
    private final PeerLayouts peerLayouts;
    private final AtomicLong kvBytesReceived = new AtomicLong();
    private final AtomicLong kvMismatchedWords = new AtomicLong();
    /** The routes; a body route's body is read under a slot of the client's share, at most {@link #MAX_BODY_BYTES}. */
    private final Routes routes;
    private final Object inFlightLock = new Object();
    private int inFlight; // guarded by inFlightLock
    private final Map<InetAddress, Integer> inFlightByClient = new HashMap<>(); // guarded by inFlightLock
    private volatile boolean draining;
    private boolean closed; // guarded by this

    private ServeNode(ServeOptions options, SimEngine engine, TextModel text, AutoCloseable ownedModel) {
        this.text = text;
        this.ownedModel = ownedModel;
        this.options = options;
        this.engine = engine;
        this.answers = new CompletionAnswers(text, options.servedModelName(), created);
        this.routes = routes(options);
        this.clientWatch = new ClientWatch(DISCONNECT_CHECK_PERIOD, DISCONNECT_CHECK_AFTER,
                "mooncake-serve-disconnect-" + NODES.getAndIncrement());
        this.peerLayouts = new PeerLayouts(engine.kvLayout());
    }

    /** Starts a node with KV caches in host memory (or on a GPU through CUDA, as {@code options} say). */
    public static ServeNode start(ServeOptions options) {
        return start(options, null);
    }

    /**
     * Starts a node.
     *
     * @param deviceMemory GPU memory for {@code --device cuda}; may be null for host memory
     * @throws IllegalStateException when the HTTP port cannot be bound (the engine is closed again)
     */
    public static ServeNode start(ServeOptions options, DeviceMemory deviceMemory) {
        String kind = options.transferEngine();
        return start(options, deviceMemory, cfg -> TransferEngines.create(kind));
    }

    /**
     * Starts a node whose ranks get their transfer engines from {@code engines} instead of
     * {@link ServeOptions#transferEngine()} (tests: fault injection, a scripted engine).
     *
     * @param deviceMemory GPU memory for {@code --device cuda}; may be null for host memory
     */
    public static ServeNode start(ServeOptions options, DeviceMemory deviceMemory,
            Function<MooncakeConnectorConfig, TransferEngine> engines) {
        return startNode(options, deviceMemory, engines, null, null);
    }

    /**
     * Starts a node whose tokens {@code model} computes ({@code serve --model DIR}: Jlama, TP 1, host
     * memory; {@link ServeOptions#model()} must be {@code model.kvShape(blockSize)}). The node owns
     * {@code model} from here on: it closes it when it closes, or now when it cannot start.
     */
    public static ServeNode startWithModel(ServeOptions options, io.mooncake4j.model.JlamaModel model,
            Function<MooncakeConnectorConfig, TransferEngine> engines) {
        return startWithModel(options, model, engines, null);
    }

    /**
     * As {@link #startWithModel(ServeOptions, io.mooncake4j.model.JlamaModel, Function)}, with a shared
     * KV pool beside the prefix cache ({@code kv_connector: MooncakeStoreConnector}; null for none).
     */
    public static ServeNode startWithModel(ServeOptions options, io.mooncake4j.model.JlamaModel model,
            Function<MooncakeConnectorConfig, TransferEngine> engines, io.mooncake4j.sim.KvPool.Factory pool) {
        Objects.requireNonNull(model, "model");
        try {
            if (!options.model().equals(model.kvShape(options.model().blockSize()))) {
                throw new IllegalArgumentException("the options' KV shape " + options.model()
                        + " is not the model's " + model.kvShape(options.model().blockSize()));
            }
            if (options.maxModelLen() > model.contextLength()) {
                throw new IllegalArgumentException("max model length " + options.maxModelLen()
                        + " exceeds the model's context of " + model.contextLength() + " tokens");
            }
            return startNode(options, null, engines, model, pool);
        } catch (RuntimeException | Error e) {
            model.close();
            throw e;
        }
    }

    private static ServeNode startNode(ServeOptions options, DeviceMemory deviceMemory,
            Function<MooncakeConnectorConfig, TransferEngine> engines, io.mooncake4j.model.JlamaModel model,
            io.mooncake4j.sim.KvPool.Factory pool) {
        Objects.requireNonNull(options, "options");
        Objects.requireNonNull(engines, "engines");
        SimEngine.KvPlacement placement = SimEngine.KvPlacement.host();
        if (options.device().equals("cuda")) {
            if (deviceMemory == null) {
                throw new IllegalArgumentException("KV caches on the GPU need a DeviceMemory");
            }
            deviceMemory.checkLocation("cuda:" + options.gpuId());
            placement = SimEngine.KvPlacement.gpu(deviceMemory, options.gpuId());
        }
        MetricsRoute metrics = MetricsRoute.create(); // GET /metrics when Micrometer's Prometheus registry is present
        io.mooncake4j.model.JlamaStepModel steps = model == null ? null : new io.mooncake4j.model.JlamaStepModel(model);
        // a P registers its KV layout with its bootstrap server, where a D asks for it (PeerLayouts)
        String layout = steps == null ? null : KvLayouts.withBlockSize(steps.kvLayout(), options.model().blockSize());
        List<TransferEngine> made = new java.util.concurrent.CopyOnWriteArrayList<>(); // one per rank
        SimEngine.WorkerFactory factory = sharingBootstrapPort(ConnectorSimWorker.factory(cfg -> {
            TransferEngine e = metrics.meter(engines.apply(cfg), cfg);
            made.add(e);
            return e;
        }, b -> b.bootstrapBindHost(options.host()).kvLayout(layout)));
        SimEngine engine;
        TextModel text = TextModel.SYNTHETIC;
        SimEngine.Limits limits = new SimEngine.Limits(options.maxNumSeqs(), options.maxNumBatchedTokens());
        if (model != null) {
            text = TextModel.of(model, steps);
            engine = pool == null
                    ? SimEngine.start(options.connector(), steps, options.model().blockSize(), options.numBlocks(),
                            limits, factory, placement)
                    : SimEngine.start(options.connector(), steps, options.model().blockSize(), options.numBlocks(),
                            limits, factory, placement, pool);
        } else {
            engine = SimEngine.start(options.connector(), options.model(), options.numBlocks(), limits, factory,
                    placement, SimEngine.Sampling.KV);
        }
        ServeNode node = new ServeNode(options, engine, text, model);
        node.transferEngines = List.copyOf(made); // the ranks were made by SimEngine.start
        metrics.bind(engine);
        node.metrics = metrics;
        try {
            node.server = HttpFront.start("mooncake-serve-http-", options.host(), options.port(), 128, options.http(),
                    node.routes);
        } catch (IOException | RuntimeException e) {
            node.clientWatch.close();
            node.peerLayouts.close();
            metrics.close();
            engine.close();
            throw new IllegalStateException(String.format(Locale.ROOT, "cannot serve HTTP on %s:%d: %s",
                    options.host(), options.port(), e.getMessage()), e);
        }
        metrics.bindCounts(HTTP_CUT_METER, "HTTP connections or request bodies the front door cut off",
                node.frontDoorCounts());
        LOG.info("{}", node.describe());
        return node;
    }

    /**
     * With {@code VLLM_MOONCAKE_BOOTSTRAP_PORT=0} rank 0's bootstrap server binds any free port, which
     * the other ranks must register at: they are created after rank 0 and get its bound port.
     */
    private static SimEngine.WorkerFactory sharingBootstrapPort(SimEngine.WorkerFactory base) {
        int[] bound = {-1}; // the engine creates its ranks in order, on one thread
        return new SimEngine.WorkerFactory() {
            @Override
            public SimWorker create(MooncakeConnectorConfig cfg, io.mooncake4j.memory.KvCaches caches) {
                return create(cfg, caches, null);
            }

            @Override
            public SimWorker create(MooncakeConnectorConfig cfg, io.mooncake4j.memory.KvCaches caches,
                    io.mooncake4j.memory.ModelPreset model) {
                MooncakeConnectorConfig c = cfg;
                if (cfg.tpRank() > 0 && cfg.bootstrapPort() == 0 && bound[0] > 0) {
                    c = cfg.toBuilder().bootstrapPort(bound[0]).build();
                }
                SimWorker w = model == null ? base.create(c, caches) : base.create(c, caches, model);
                if (cfg.tpRank() == 0 && w instanceof ConnectorSimWorker csw) {
                    bound[0] = csw.worker().bootstrapServerPort();
                }
                return w;
            }
        };
    }

    // ------------------------------------------------------------------ facts

    /** The bound HTTP port. */
    public int port() {
        return server.port();
    }

    /** {@code http://host:port} of the HTTP server (the advertised hostname when bound to all interfaces). */
    public String url() {
        String h = options.host();
        if (h.equals("0.0.0.0") || h.equals("::")) {
            h = options.connector().hostname();
        }
        return BootstrapAddresses.httpUrl(h, port());
    }

    /**
     * What this node's KV blocks mean ({@link SimEngine#kvLayout()}: model, dtype, shapes, tokenizer, block
     * size), or null for the synthetic model; registered with the bootstrap server and compared by a decode node.
     */
    public String kvLayout() {
        return engine.kvLayout();
    }

    /** This engine's id (the {@code remote_engine_id} decode nodes name it by). */
    public String engineId() {
        return engine.engineId();
    }

    /** The connector role. */
    public KvRole role() {
        return options.connector().kvRole();
    }

    /** The options it runs with. */
    public ServeOptions options() {
        return options;
    }

    /** The engine (tests, diagnostics). */
    public SimEngine engine() {
        return engine;
    }

    /** The port of the bootstrap server this node runs (P and {@code kv_both}), or -1. */
    public int bootstrapPort() {
        List<SimWorker> ws = engine.workers();
        if (!ws.isEmpty() && ws.getFirst() instanceof ConnectorSimWorker c) {
            return c.worker().bootstrapServerPort();
        }
        return -1;
    }

    /**
     * The {@code remote_bootstrap_addr} decode nodes use for this node: its own bootstrap server, or
     * the external one of {@code kv_connector_extra_config.bootstrap_server_address}; empty for a
     * {@code kv_consumer}.
     */
    public Optional<String> bootstrapUrl() {
        if (options.connector().isConsumer()) {
            return Optional.empty();
        }
        if (options.connector().bootstrapServerAddress().isPresent()) {
            BootstrapAddresses.HostPort hp = BootstrapAddresses.splitHostPort(
                    options.connector().bootstrapServerAddress().get());
            return Optional.of(BootstrapAddresses.httpUrl(hp.host(), hp.port()));
        }
        int p = bootstrapPort();
        return p > 0 ? Optional.of(BootstrapAddresses.httpUrl(options.connector().hostname(), p)) : Optional.empty();
    }

    /** The side-channel (ZMQ ROUTER) port of each P rank; empty for a {@code kv_consumer}. */
    public List<Integer> sideChannelPorts() {
        List<Integer> out = new ArrayList<>();
        if (!options.connector().isConsumer()) {
            for (SimWorker w : engine.workers()) {
                if (w instanceof ConnectorSimWorker c) {
                    out.add(c.worker().sideChannelPort());
                }
            }
        }
        return out;
    }

    /** The transfer engine's RPC (handshake) port of each rank. */
    public List<Integer> enginePorts() {
        List<Integer> out = new ArrayList<>();
        for (SimWorker w : engine.workers()) {
            if (w instanceof ConnectorSimWorker c) {
                out.add(c.worker().rpcPort());
            }
        }
        return out;
    }

    /** The start-up line: role, engine id, ports, KV memory. */
    public String describe() {
        return String.format(Locale.ROOT, "mooncake4j serve: %s engine %s, model %s (served as %s), tp %d; "
                        + "http %s; bootstrap port %s; side-channel ports %s; engine ports %s; KV %s (%d blocks "
                        + "of %d tokens per rank) in %s; transfer engine %s",
                role().wireName(), engineId(), options.model().name(), options.servedModelName(),
                options.connector().tpSize(), url(), bootstrapPort() > 0 ? Integer.toString(bootstrapPort()) : "none",
                sideChannelPorts(), enginePorts(), Bytes.human(engine.kvBytes()), options.numBlocks(),
                options.model().blockSize(), engine.placement(), options.transferEngine());
    }

    // ------------------------------------------------------------------ lifecycle

    /**
     * Stops taking requests (new ones and {@code /health} get 503) and waits, until {@code timeout},
     * for the requests in flight to finish and for the KV blocks held for decode nodes to be pulled
     * (or expire). Idempotent.
     *
     * @return whether everything finished in time
     */
    public boolean drain(Duration timeout) {
        draining = true;
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (inFlightLock) {
            while (inFlight > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    LOG.warn("drain: {} request(s) still in flight after {}", inFlight, timeout);
                    return false;
                }
                try {
                    inFlightLock.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        while (!engineIdle()) {
            if (System.nanoTime() - deadline >= 0 || engine.failure() != null) {
                SimEngine.Snapshot s = engine.snapshot();
                LOG.warn("drain: engine {} not idle after {}: {} waiting, {} running, {} loading KV, {} holding KV "
                        + "for a decode node", engineId(), timeout, s.waiting(), s.running(), s.loadingRemoteKv(),
                        s.delayedFree());
                return false;
            }
            LockSupport.parkNanos(5_000_000); // the engine publishes its state once per step
        }
        return true;
    }

    private boolean engineIdle() {
        SimEngine.Snapshot s = engine.snapshot();
        return s.waiting() == 0 && s.running() == 0 && s.loadingRemoteKv() == 0 && s.delayedFree() == 0;
    }

    /** Whether {@link #drain} was called. */
    public boolean draining() {
        return draining;
    }

    /**
     * Drains (bounded by {@link ServeOptions#drainTimeout}), stops the HTTP server, then closes the engine:
     * what is still in flight fails, the workers close (and the bootstrap server with rank 0's), the KV
     * memory is freed. Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        boolean clean = drain(options.drainTimeout());
        engine.close();
        server.close();
        clientWatch.close();
        peerLayouts.close();
        metrics.close();
        if (ownedModel != null) {
            try {
                ownedModel.close();
            } catch (Exception e) {
                LOG.warn("engine {}: closing the model failed", engineId(), e);
            }
        }
        LOG.info("engine {} stopped ({})", engineId(), clean ? "drained" : "drain timed out");
    }

    // ------------------------------------------------------------------ HTTP

    /** The HTTP front door (its counters of slow clients cut off). */
    public HttpFront httpFront() {
        return server;
    }

    /**
     * The route table: the completion routes take a body (read for them under a body-upload slot of
     * the client's share, at most {@link #MAX_BODY_BYTES}: see {@link Routes}); the others read none.
     */
    private Routes routes(ServeOptions options) {
        return Routes.builder(options.http(), MAX_BODY_BYTES, ServeNode::refusal, ServeNode::unmatched)
                .slotWait(BODY_SLOT_WAIT)
                .failures(ServeNode::failed)
                .withoutBody("GET", "/health", ex -> {
                    if (draining || engine.failure() != null) {
                        throw unavailable();
                    }
                    ex.sendResponseHeaders(200, -1);
                })
                .withoutBody("GET", "/v1/models", ex -> sendJson(ex, 200, models()))
                .withoutBody("GET", "/metrics", this::metrics)
                .withoutBody("GET", "/mooncake/status", ex -> sendJson(ex, 200, status()))
                .withBody("POST", "/v1/completions", (ex, body) -> complete(ex, body, false))
                .withBody("POST", "/v1/chat/completions", (ex, body) -> complete(ex, body, true))
                .build();
    }

    /** What a route threw: an {@link OpenAiError} is its answer; an I/O error, a client gone; else a 500. */
    private static void failed(Exchange ex, Exception e) {
        if (e instanceof OpenAiError error) {
            sendError(ex, error);
        } else if (e instanceof IOException) {
            LOG.debug("HTTP exchange {} {} failed", ex.method(), ex.path(), e);
        } else {
            LOG.error("HTTP exchange {} {} failed", ex.method(), ex.path(), e);
            sendError(ex, new OpenAiError(500, "InternalServerError", null, String.valueOf(e.getMessage())));
        }
    }

    private void metrics(Exchange ex) throws IOException {
        MetricsRoute m = metrics;
        if (!m.available()) {
            throw new OpenAiError(404, "NotFoundError", null,
                    "no /metrics: io.micrometer:micrometer-registry-prometheus is not on the class path");
        }
        byte[] b = m.scrape().getBytes(StandardCharsets.UTF_8);
        ex.setHeader("Content-Type", m.contentType());
        ex.sendResponseHeaders(200, b.length);
        try (OutputStream out = ex.responseBody()) {
            out.write(b);
        }
    }

    private static void unmatched(Exchange ex, java.util.Set<String> allowed) {
        if (allowed.isEmpty()) {
            throw new OpenAiError(404, "NotFoundError", null, "no route " + ex.path());
        }
        throw new OpenAiError(405, "MethodNotAllowed", null, "use " + String.join(" or ", allowed) + " here, not "
                + ex.method());
    }

    /** The table's own answers (413, 503) in the OpenAI error shape. */
    private static byte[] refusal(Exchange ex, Routes.Refusal r) {
        OpenAiError e = r.reason() == Routes.Reason.TOO_LARGE ? tooLarge()
                : new OpenAiError(r.status(), "ServiceUnavailableError", null, r.message());
        return Json.write(e.body()).getBytes(StandardCharsets.UTF_8);
    }

    private OpenAiError unavailable() {
        if (engine.failure() != null) {
            return new OpenAiError(503, "ServiceUnavailableError", null,
                    "the engine stopped after an error: " + engine.failure());
        }
        return new OpenAiError(503, "ServiceUnavailableError", null, "the server is shutting down");
    }

    private Map<String, Object> models() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", options.servedModelName());
        m.put("object", "model");
        m.put("created", created);
        m.put("owned_by", "mooncake4j");
        m.put("root", options.servedModelName());
        m.put("parent", null);
        m.put("max_model_len", options.maxModelLen());
        m.put("permission", List.of());
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("object", "list");
        root.put("data", List.of(m));
        return root;
    }

    /** The meter of the front door's cut-offs, tag {@code reason} (the keys of {@link #frontDoorCounts()}). */
    public static final String HTTP_CUT_METER = "mooncake4j.http.cut";

    /**
     * The front door's cut-offs by reason: {@code header_timeout}, {@code slow_body} (below the minimum
     * rate in a recent window), {@code late_body} (past its overall deadline), {@code body_evicted} (the
     * slowest body, closed to make room for a newcomer).
     */
    Map<String, java.util.function.LongSupplier> frontDoorCounts() {
        Map<String, java.util.function.LongSupplier> m = new LinkedHashMap<>();
        m.put("header_timeout", () -> server == null ? 0 : server.headerTimeouts());
        m.put("slow_body", () -> server == null ? 0 : server.slowBodies());
        m.put("late_body", () -> server == null ? 0 : server.lateBodies());
        m.put("body_evicted", routes::bodyEvictions);
        return m;
    }

    /** Bytes each transport carried, summed over the ranks' engines (a P's engines move the KV it sends). */
    private Map<String, Object> bytesByTransport() {
        Map<String, Object> sum = new java.util.TreeMap<>();
        for (TransferEngine e : transferEngines) {
            e.bytesByTransport().forEach((k, v) -> sum.merge(k, v, (x, y) -> (Long) x + (Long) y));
        }
        return sum;
    }

    private Map<String, Object> status() {
        SimEngine.Snapshot s = engine.snapshot();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("engine_id", engineId());
        m.put("kv_role", role().wireName());
        m.put("model", options.model().name());
        m.put("tensor_parallel_size", options.connector().tpSize());
        m.put("bootstrap_port", bootstrapPort());
        m.put("num_blocks", engine.numBlocks());
        m.put("free_blocks", s.freeBlocks());
        m.put("waiting", s.waiting());
        m.put("running", s.running());
        m.put("loading_remote_kv", s.loadingRemoteKv());
        m.put("holding_kv_for_decode", s.delayedFree());
        m.put("finished", s.finished());
        m.put("failed", s.failed());
        synchronized (inFlightLock) {
            m.put("in_flight", inFlight);
        }
        m.put("draining", draining);
        m.put("requests_ok", requestsOk.get());
        m.put("requests_failed", requestsFailed.get());
        m.put("requests_aborted", requestsAborted.get());
        m.put("kv_bytes_received", kvBytesReceived.get());
        m.put("kv_mismatched_words", kvMismatchedWords.get());
        m.put("transfer_bytes_by_transport", bytesByTransport());
        m.put("connector_stats", new LinkedHashMap<>(engine.kvConnectorStats().reduce()));
        if (engine.kvPool() != null) {
            m.put("store_connector", engine.kvPool().counters());
        }
        m.put("side_channel", NodeCounters.sideChannel(engine.workers()));
        Map<String, Object> cut = new LinkedHashMap<>();
        frontDoorCounts().forEach((k, v) -> cut.put(k, v.getAsLong()));
        m.put("http_cut", cut);
        return m;
    }

    private void complete(Exchange ex, byte[] raw, boolean chat) throws IOException {
        String body = new String(raw, StandardCharsets.UTF_8);
        CompletionRequest req = CompletionRequest.parse(body, chat, role(), text);
        if (req.model() != null && !req.model().equals(options.servedModelName())) {
            throw new OpenAiError(404, "NotFoundError", "model", "The model `" + req.model() + "` does not exist.");
        }
        String dp = ex.header("X-data-parallel-rank");
        if (dp != null && !dp.trim().equals("0")) {
            throw OpenAiError.badRequest(null, "X-data-parallel-rank " + dp + " is out of range: this node has one "
                    + "data-parallel rank (0)");
        }
        int total = req.prompt().length + req.maxTokens();
        if (total > options.maxModelLen()) {
            throw OpenAiError.badRequest(null, String.format(Locale.ROOT, "This model's maximum context length is "
                    + "%d tokens. However, you requested %d tokens (%d in the %s, %d in the completion). Please "
                    + "reduce the length of the %s or completion.", options.maxModelLen(), total,
                    req.prompt().length, chat ? "messages" : "prompt", req.maxTokens(), chat ? "messages" : "prompt"));
        }
        String header = ex.header("X-Request-Id");
        String base = header != null && !header.isBlank() ? header.trim() : UUID.randomUUID().toString().replace("-", "");
        String responseId = (chat ? "chatcmpl-" : "cmpl-") + base;
        String engineRequestId = responseId + "-" + seq.incrementAndGet();
        BlockingQueue<Integer> tokens = req.stream() ? new LinkedBlockingQueue<>() : null;
        text.sampling(engineRequestId, req.temperature(), req.seed());
        CompletableFuture<SimResult> f = submit(engineRequestId, req, tokens, ex.clientAddress());
        // as vLLM: a request whose client went away is aborted (its blocks freed, per the connector's rules)
        Runnable abort = () -> {
            if (!f.isDone()) {
                requestsAborted.incrementAndGet();
                LOG.debug("request {}: the client disconnected; aborting it", engineRequestId);
                engine.abort(engineRequestId, "aborted: the client disconnected");
            }
        };
        try (ClientWatch.Watch w = clientWatch.watch(ex.localAddress(), ex.remoteAddress(), abort)) {
            if (req.stream()) {
                answers.stream(ex, req, responseId, f, tokens);
            } else {
                SimResult r = answers.await(f);
                sendJson(ex, 200, answers.response(req, responseId, r, returnedParams(req)));
            }
        } catch (IOException e) {
            abort.run(); // a write to the client failed: it is gone
            throw e;
        }
    }

    /**
     * Submits to the engine, counting the request in flight until the engine is done with it. The future
     * returned completes (as the engine's) only after that bookkeeping: an answer sent once it completes
     * is never seen by a client before {@code /mooncake/status} counts the request done and frees its slot
     * (the engine completes its own future first, and wakes a waiter on it before its other dependents).
     */
    private CompletableFuture<SimResult> submit(String id, CompletionRequest req, BlockingQueue<Integer> tokens,
            InetAddress client) {
        peerLayouts.check(id, req.kvTransferParams()); // before anything is admitted: 400 for another P layout
        synchronized (inFlightLock) {
            if (draining || engine.failure() != null) {
                throw unavailable();
            }
            if (inFlight >= options.maxPendingRequests()) {
                throw new OpenAiError(503, "ServiceUnavailableError", null, String.format(Locale.ROOT,
                        "too many requests in flight (%d); retry later", inFlight));
            }
            int share = options.http().inFlightShare(options.maxPendingRequests());
            int mine = inFlightByClient.getOrDefault(options.http().network(client), 0);
            if (mine >= share) {
                throw new OpenAiError(503, "ServiceUnavailableError", null, String.format(Locale.ROOT,
                        "too many requests in flight from %s (%d, its share); retry later", client.getHostAddress(),
                        mine));
            }
            inFlight++;
            inFlightByClient.merge(options.http().network(client), 1, Integer::sum);
        }
        CompletableFuture<SimResult> f;
        java.util.function.IntConsumer listener = tokens == null ? null : tokens::add;
        if (text.real()) {
            listener = stopWatch(id, req, listener);
        }
        try {
            f = engine.submit(id, req.prompt(), req.maxTokens(), req.kvTransferParams(), listener);
        } catch (IllegalArgumentException e) {
            released(client);
            throw OpenAiError.badRequest(null, e.getMessage());
        } catch (RuntimeException e) {
            released(client);
            throw e;
        }
        return f.whenComplete((r, e) -> {
            if (r != null && (r.error() == null || CompletionAnswers.STOPPED.equals(r.error()))) {
                requestsOk.incrementAndGet();
            } else {
                requestsFailed.incrementAndGet();
            }
            if (r != null && (r.error() == null || CompletionAnswers.STOPPED.equals(r.error()))) {
                kvBytesReceived.addAndGet(r.bytesReceived());
                kvMismatchedWords.addAndGet(r.mismatchedWords());
            }
            released(client);
            if (tokens != null) {
                tokens.add(CompletionAnswers.DONE);
            }
        });
    }

    /**
     * A real model's token listener: ends the request ({@link SimEngine#stop}, a normal end applied before
     * the engine's next step) at an end-of-sequence token or once the text holds a stop string, then passes
     * the token on. Runs on the step loop.
     */
    private java.util.function.IntConsumer stopWatch(String id, CompletionRequest req,
            java.util.function.IntConsumer next) {
        int[] out = new int[req.maxTokens()];
        int[] n = {0};
        return t -> {
            if (n[0] < out.length) {
                out[n[0]++] = t;
                if (n[0] < out.length && (text.isEos(t)
                        || !req.stop().isEmpty() && TextAnswer.of(text, req.stop(), out, n[0]).stopped())) {
                    engine.stop(id);
                }
            }
            if (next != null) {
                next.accept(t);
            }
        };
    }

    private void released(InetAddress client) {
        synchronized (inFlightLock) {
            inFlight--;
            inFlightByClient.computeIfPresent(options.http().network(client), (k, n) -> n == 1 ? null : n - 1);
            inFlightLock.notifyAll();
        }
    }

    /**
     * What a P response carries in {@code kv_transfer_params}: for a {@code do_remote_decode} request,
     * the parameters a decode node needs to pull this request's KV (vLLM's Mooncake connector returns
     * none, its proxy builds them from {@code /query}; NIXL's returns them, and so do we, so that a
     * proxy may also forward P's answer to D); otherwise null.
     */
    private Map<String, Object> returnedParams(CompletionRequest req) {
        if (!req.remoteDecode()) {
            return null;
        }
        Optional<String> url = bootstrapUrl();
        if (url.isEmpty()) {
            return null;
        }
        Map<String, Object> p = new LinkedHashMap<>();
        p.put(KvTransferParams.DO_REMOTE_PREFILL, true);
        p.put(KvTransferParams.DO_REMOTE_DECODE, false);
        p.put(KvTransferParams.REMOTE_ENGINE_ID, engineId());
        p.put(KvTransferParams.REMOTE_BOOTSTRAP_ADDR, url.get());
        p.put(KvTransferParams.TRANSFER_ID, req.transferId());
        if (engine.kvLayout() != null) { // checked by a D node the proxy forwards these to
            p.put(SimEngine.KV_LAYOUT_PARAM, engine.kvLayout());
        }
        return p;
    }

    private static OpenAiError tooLarge() {
        return new OpenAiError(413, "RequestEntityTooLarge", null, "the request body is larger than "
                + Bytes.human(MAX_BODY_BYTES));
    }

    private static void sendJson(Exchange ex, int status, Object body) throws IOException {
        byte[] b = Json.write(body).getBytes(StandardCharsets.UTF_8);
        ex.setHeader("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream out = ex.responseBody()) {
            out.write(b);
        }
    }

    private static void sendError(Exchange ex, OpenAiError e) {
        if (ex.responseCode() != -1) {
            LOG.debug("cannot send error {} after the response started: {}", e.status(), e.getMessage());
            return;
        }
        try {
            sendJson(ex, e.status(), e.body());
        } catch (IOException io) {
            LOG.debug("could not send error {} to the client", e.status(), io);
        }
    }
}
