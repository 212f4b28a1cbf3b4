package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.connector.worker.receive.PullChannels;
import io.mooncake4j.connector.worker.send.KvSender;
import io.mooncake4j.connector.worker.send.ListenerStats;
import io.mooncake4j.connector.worker.send.SenderListener;
import io.mooncake4j.connector.worker.send.SideChannelHandler;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.internal.sys.ResourceLimits;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryStorage;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.function.IntPredicate;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The worker half of the connector (vLLM's {@code MooncakeConnectorWorker}): engine set-up, KV-cache
 * registration and, on producers, the side-channel listener that decode workers pull from.
 *
 * <p>Lifecycle: the constructor initialises the engine ({@code initialize(hostname, "P2PHANDSHAKE",
 * protocol, deviceName)}); {@link #registerKvCaches} registers the caches once and, unless the role
 * is {@code kv_consumer}, starts the listener and returns when it is bound; {@link #close()} stops
 * the listener threads and their sockets.
 *
 * <p>Ownership: the worker does not own the engine nor the KV-cache memory. {@link #close()} does
 * <b>not</b> unregister the memory, as in vLLM (spec §6.14): the caller closes the engine, which
 * drops its registrations, and only then frees the memory.
 *
 * <p>Threads: see the package comment. {@link #registerKvCaches} is called by one thread;
 * accessors and {@link #close()} are safe from any thread.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorWorker</a>
 */
public final class MooncakeConnectorWorker implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeConnectorWorker.class);

    /** vLLM's message when nothing is registered, kept verbatim. */
    static final String NO_KV_CACHES_MESSAGE = "No KV cache tensors were registered with Mooncake.";

    private final MooncakeConnectorConfig config;
    private final TransferEngine engine;
    private final KvCacheConfig kvCacheConfig;
    private final int physicalBlocksPerLogicalBlock;
    private final Supplier<OptionalLong> memlockLimit;
    private final boolean isKvProducer;
    private final boolean isKvConsumer;
    private final int rpcPort;
    private final LongSupplier nanoClock;
    private final boolean mla;
    private final int totalNumKvHeads;
    private final String bootstrapBindHost;
    private final Duration receiveTimeoutMargin;
    private final Duration handshakeTimeout;
    private final Duration loopCallTimeout;
    private final TransferTopology topology;
    private final MooncakeKvConnectorStats xferStats = new MooncakeKvConnectorStats();
    private final BackgroundErrors backgroundErrors = new BackgroundErrors(LOG);
    private final HealthMonitor healthMonitor = new HealthMonitor();
    private final SideChannelLimits sideChannelLimits;
    // written by setSideChannelHandler, read on the sender-loop thread; null = the send path
    private volatile SideChannelHandler sideChannelHandler;
    // set once under lock before the loops accept work; read by the embedder's thread
    private volatile KvSender sender;
    /**
     * A step since the last {@link #waitForSave} named layer-wise chunks (the model runner's thread:
     * {@code startLoadKv}, {@code saveKvLayer}, {@code waitForSave}); while false the layer hooks
     * post nothing.
     */
    private volatile boolean layerwiseForwardOpen;
    private final java.util.concurrent.atomic.LongAdder layerHookPosts = new java.util.concurrent.atomic.LongAdder();
    private volatile KvReceiver receiver;
    /** The embedder's wake-up for new getFinished results ({@link #setFinishedListener}); null when none. */
    private volatile Runnable finishedListener;
    /** Failed pulls polled before their finish was fetched (guarded by itself; see getTransferResults). */
    private final Set<String> failedNotYetFinished = new java.util.LinkedHashSet<>();

    private final Object lock = new Object();
    // guarded by lock
    private KvRegistration registration;
    private RegistrationPlan registeredPlan;
    private SenderListener listener;
    private MooncakeBootstrapServer bootstrapServer;
    private int sideChannelPort;
    private boolean closed;
    /** Completed when close() starts: a call waiting on a loop returns instead of waiting for a task close may drop. */
    private final CompletableFuture<Void> closing = new CompletableFuture<>();

    /**
     * A worker with the default options; see {@link #builder}.
     *
     * @param config        the connector configuration of this rank
     * @param engine        the transfer engine, not yet initialised (the worker initialises it; the caller closes it)
     * @param kvCacheConfig the engine's KV-cache groups (vLLM's KV cache config)
     */
    public MooncakeConnectorWorker(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig) {
        this(builder(config, engine, kvCacheConfig));
    }

    private MooncakeConnectorWorker(Builder b) {
        this.config = b.config;
        this.engine = b.engine;
        this.kvCacheConfig = b.kvCacheConfig;
        this.physicalBlocksPerLogicalBlock = b.physicalBlocksPerLogicalBlock;
        this.memlockLimit = b.memlockLimit;
        this.sideChannelHandler = b.sideChannelHandler;
        this.nanoClock = b.nanoClock;
        this.mla = b.mla;
        this.totalNumKvHeads = b.totalNumKvHeads;
        this.bootstrapBindHost = b.bootstrapBindHost;
        this.receiveTimeoutMargin = b.receiveTimeoutMargin;
        this.handshakeTimeout = b.handshakeTimeout;
        this.loopCallTimeout = b.loopCallTimeout;
        this.sideChannelLimits = b.sideChannelLimits;
        boolean mamba = kvCacheConfig.groups().stream().anyMatch(g -> g.spec().kind() == KvCacheSpec.Kind.MAMBA);
        this.topology = new TransferTopology(config.tpRank(), config.tpSize(), mla, mamba, totalNumKvHeads);
        this.isKvProducer = config.isProducer();
        this.isKvConsumer = config.isConsumer();
        LOG.info("Initializing Mooncake Transfer Engine worker {}", config.engineId());
        LOG.info("The Mooncake Transfer Engine is using {} as its protocol.", config.protocol());
        int ret = engine.initialize(config.hostname(), TransferEngine.P2P_HANDSHAKE, config.protocol(),
                config.deviceName());
        if (ret != 0) {
            LOG.debug("initialize({}, {}, {}, '{}') returned {} ({})", config.hostname(), TransferEngine.P2P_HANDSHAKE,
                    config.protocol(), config.deviceName(), ret, ErrorCodes.name(ret));
            throw new EngineInitializationException(ret, config.hostname(), config.protocol(), config.deviceName());
        }
        this.rpcPort = engine.getRpcPort();
        LOG.debug("Mooncake Transfer Engine initialized at {}:{}", config.hostname(), rpcPort);
    }

    /**
     * {@return a builder for a worker with test or embedding hooks}
     *
     * @param config        the connector configuration of this rank
     * @param engine        the transfer engine, not yet initialised (the worker initialises it; the caller closes it)
     * @param kvCacheConfig the engine's KV-cache groups (vLLM's KV cache config)
     */
    public static Builder builder(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig) {
        return new Builder(config, engine, kvCacheConfig);
    }

    /**
     * Computes what {@link #registerKvCaches} would register, without registering anything: the engine is
     * only asked whether it can reach each GPU location of the storages ({@link TransferEngine#deviceMemoryAccess}),
     * so that GPU memory it cannot reach is refused before registration, with the engine's reason and fix.
     *
     * @param kvCaches layer name to the layer's tensors (one fused tensor, or several such as K and V), in layer order
     * @return the plan, to inspect or to register
     * @throws ConnectorException when a region's transfer length exceeds its block stride
     */
    public RegistrationPlan planRegistration(Map<String, List<KvCacheTensor>> kvCaches) {
        Objects.requireNonNull(kvCaches, "kvCaches");
        return RegistrationPlan.of(kvCaches, kvCacheConfig, physicalBlocksPerLogicalBlock, config.protocol(),
                memlockLimit.get(), engine::deviceMemoryAccess);
    }

    /**
     * vLLM's {@code register_kv_caches}: plans (see {@link #planRegistration}), registers every unique
     * storage in one {@code batchRegisterMemory} call (retried {@code registrationRetries} times), and
     * on producers starts the side-channel listener and waits until it is bound.
     *
     * @param kvCaches layer name to the layer's tensors, in layer order (use a {@link java.util.LinkedHashMap})
     * @return the per-region lists and registered storages
     * @throws ConnectorException with {@value #NO_KV_CACHES_MESSAGE} when nothing is to be registered; a
     *         {@link KvCacheRegistrationException} when the engine keeps failing; a plain one for GPU
     *         memory the engine cannot reach ({@link RegistrationPlan#locationProblem()}), a transfer length
     *         above the stride, or a listener that does not start
     */
    public KvRegistration registerKvCaches(Map<String, List<KvCacheTensor>> kvCaches) {
        LOG.info("Registering KV_Caches. layers: {}", kvCaches.size());
        return registerKvCaches(planRegistration(kvCaches));
    }

    /**
     * Registers a plan made by {@link #planRegistration} of this worker; see {@link #registerKvCaches(Map)}.
     *
     * @param plan a plan made by {@link #planRegistration} of this worker
     * @return what was registered (vLLM's registration facts)
     */
    public KvRegistration registerKvCaches(RegistrationPlan plan) {
        Objects.requireNonNull(plan, "plan");
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("worker is closed");
            }
            if (registration != null) {
                throw new ConnectorException("KV caches are already registered with this worker; "
                        + "create a new worker to register a different set");
            }
        }
        for (String layer : plan.skippedLayers()) {
            LOG.debug("Skipping layer {} because no KV cache spec is present.", layer);
        }
        if (plan.isEmpty()) {
            throw new ConnectorException(NO_KV_CACHES_MESSAGE);
        }
        if (plan.locationProblem().isPresent()) {
            throw new ConnectorException(plan.locationProblem().get());
        }
        plan.memlockWarning().ifPresent(LOG::warn);
        plan.deviceMemoryText().ifPresent(t -> LOG.info("GPU memory over {}: {}", plan.protocol(), t));
        logInventory(plan);

        List<MemoryStorage> storages = plan.storages();
        long[] addrs = new long[storages.size()];
        long[] lens = new long[storages.size()];
        for (int i = 0; i < addrs.length; i++) {
            addrs[i] = storages.get(i).address();
            lens[i] = storages.get(i).byteSize();
        }
        int attempts = 1 + config.registrationRetries();
        int ret = 0;
        int made = 0;
        for (int attempt = 1; attempt <= attempts; attempt++) {
            made = attempt;
            ret = engine.batchRegisterMemory(addrs, lens);
            if (ret == 0) {
                break;
            }
            if (attempt < attempts) {
                LOG.warn("batchRegisterMemory of {} storage(s), {} returned {} ({}); retrying ({} of {})",
                        addrs.length, Bytes.human(plan.totalBytes()), ret, ErrorCodes.name(ret), attempt + 1, attempts);
            }
        }
        if (ret != 0) {
            throw registrationFailure(plan, ret, made);
        }
        KvRegistration reg = plan.kvRegistration();
        LOG.debug("registered block_lens={} kv_block_lens={}", reg.blockLenPerLayer(), reg.kvBlockLenPerLayer());
        synchronized (lock) {
            registration = reg;
            registeredPlan = plan;
        }
        if (!isKvProducer) {
            startReceiver(reg);
        }
        if (isKvConsumer) {
            return reg;
        }
        launchBootstrapServerIfSelected();
        startListener(reg);
        registerWithBootstrap();
        return reg;
    }

    // ------------------------------------------------------------------ start-up of the loops

    private IntPredicate mambaGroups() {
        List<io.mooncake4j.memory.KvCacheGroup> groups = kvCacheConfig.groups();
        return g -> g >= 0 && g < groups.size() && groups.get(g).spec().kind() == KvCacheSpec.Kind.MAMBA;
    }

    private ToIntFunction<String> groupOfLayer() {
        Map<String, Integer> byLayer = kvCacheConfig.transferGroupIndexByLayer();
        return name -> byLayer.getOrDefault(name, 0);
    }

    private Function<String, LayerLayout> layoutOfLayer() {
        return name -> kvCacheConfig.specOf(name)
                .map(sp -> new LayerLayout(sp.kind().isAttention(), sp.pageSizeBytes() > sp.unpaddedPageSizeBytes(),
                        false))
                .orElse(null);
    }

    private void startReceiver(KvRegistration reg) {
        long receiveTimeout = config.abortRequestTimeout().plus(receiveTimeoutMargin).toNanos();
        KvReceiver r;
        try {
            r = new KvReceiver(new KvReceiver.MooncakeConnectorWorkerView(config.hostname(), rpcPort, config.tpRank(),
                    config.tpSize(), config.ppRank(), config.ppSize(), reg), topology,
                    kvCacheConfig.hasNonFullAttentionGroup(), xferStats, backgroundErrors, receiveTimeout,
                    handshakeTimeout.toNanos(), new BootstrapClient(), sideChannelLimits, healthMonitor);
        } catch (IOException e) {
            throw new ConnectorException("Mooncake receiver could not be created: " + e, e);
        }
        r.onFinished(this::signalFinished);
        synchronized (lock) {
            if (closed) {
                r.close();
                throw new IllegalStateException("worker is closed");
            }
            receiver = r;
        }
        LOG.debug("Mooncake Decoder: start receiver thread");
    }

    private void launchBootstrapServerIfSelected() {
        if (!BootstrapAddresses.shouldLaunchBootstrapServer(config.bootstrapServerAddress(), config.tpRank(),
                config.ppRank(), false, config.dpRank(), config.dpRank())) {
            return;
        }
        MooncakeBootstrapServer server = new MooncakeBootstrapServer(bootstrapBindHost, config.bootstrapPort());
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("worker is closed");
            }
            bootstrapServer = server;
        }
        server.start();
    }

    /** Where this P worker registers: the configured external server, else this engine's own. */
    private String bootstrapBaseUrl() {
        if (config.bootstrapServerAddress().isPresent()) {
            BootstrapAddresses.HostPort hp = BootstrapAddresses.splitHostPort(config.bootstrapServerAddress().get());
            return BootstrapAddresses.httpUrl(hp.host(), hp.port());
        }
        int port = bootstrapServerPort();
        String host = config.hostname();
        return BootstrapAddresses.httpUrl(host, port > 0 ? port : config.bootstrapPort());
    }

    /** vLLM's {@code register_worker_with_bootstrap}, bounded by {@code listenerReadyTimeout}. */
    private void registerWithBootstrap() {
        String url = bootstrapBaseUrl();
        RegisterWorkerPayload payload = new RegisterWorkerPayload(config.engineId(), config.dpRank(), config.tpRank(),
                config.ppRank(), BootstrapAddresses.tcpAddress(config.hostname(), sideChannelPort()));
        try (BootstrapClient client = new BootstrapClient()) {
            client.register(url, payload, config.listenerReadyTimeout());
        }
        LOG.info("Registered {} with the Mooncake bootstrap server {}", payload, url);
    }

    private static void logInventory(RegistrationPlan plan) {
        if (!LOG.isDebugEnabled()) {
            return;
        }
        LOG.debug("KV-cache registration inventory: {}", plan.summary());
        for (MemoryStorage s : plan.storages()) {
            LOG.debug("  storage 0x{} {} at {} with {} region(s)", Long.toHexString(s.address()),
                    Bytes.human(s.byteSize()), s.location(), plan.regionCount(s));
        }
    }

    private KvCacheRegistrationException registrationFailure(RegistrationPlan plan, int ret, int attempts) {
        String advice;
        if (plan.memlockVerdict() == MemlockVerdict.EXCEEDS_LIMIT) {
            advice = plan.memlockWarning().orElseThrow();
        } else if (RegistrationPlan.pinsHostMemory(plan.protocol())) {
            advice = "Check that the RDMA device can register this memory (ulimit -l, nvidia-peermem for GPU "
                    + "memory); see docs/registration.md.";
        } else {
            advice = "See docs/registration.md.";
        }
        String details = String.format(Locale.ROOT,
                "The engine returned %d (%s) after %d attempt(s) for %d storage(s), %s in total at %s; protocol %s; "
                        + "RLIMIT_MEMLOCK soft limit %s. %s",
                ret, ErrorCodes.name(ret), attempts, plan.storages().size(), Bytes.human(plan.totalBytes()),
                plan.locations(), plan.protocol(),
                plan.memlockLimit().isPresent() ? ResourceLimits.describe(plan.memlockLimit().getAsLong()) : "unknown",
                advice);
        return new KvCacheRegistrationException(details, ret, attempts, plan.totalBytes(), plan.memlockLimit(),
                plan.locations());
    }

    private void startListener(KvRegistration reg) {
        SenderListener l;
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("worker is closed");
            }
            try {
                l = new SenderListener(config.hostname(), () -> {
                    SideChannelHandler h = sideChannelHandler;
                    return h != null ? h : sender;
                }, sideChannelLimits, healthMonitor, () -> sender, SenderListener.POLL_MS);
            } catch (IOException e) {
                throw new ConnectorException("Mooncake sender listener could not be created: " + e, e);
            }
            listener = l;
            TransferPlanner planner = new TransferPlanner(topology, physicalBlocksPerLogicalBlock, mambaGroups());
            List<TransferRegion> local = planner.regions(KvReceiver.longs(reg.kvCachesBaseAddr()),
                    KvReceiver.longs(reg.blockLenPerLayer()), KvReceiver.longs(reg.kvBlockLenPerLayer()),
                    reg.registeredLayerNames(), KvReceiver.ints(reg.registeredLayerIndices()),
                    KvReceiver.ints(reg.registeredGroupIndices()), groupOfLayer());
            sender = new KvSender(config.engineId(), engine, xferStats, backgroundErrors, l.senderLoop(),
                    config.numWorkers(), nanoClock, config.abortRequestTimeout().toNanos(), config.ppSize(), planner,
                    local, groupOfLayer(), layoutOfLayer(), sideChannelLimits, config.layerwisePush(),
                    config.transferThreadNice());
            sender.onFinished(this::signalFinished);
        }
        long timeoutMs = config.listenerReadyTimeout().toMillis();
        int port;
        try {
            port = l.ready().get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new ConnectorException(String.format(Locale.ROOT,
                    "Mooncake sender listener did not become ready within %d ms on tcp://%s.", timeoutMs,
                    config.hostname()), e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw new ConnectorException(String.format(Locale.ROOT,
                    "Mooncake sender listener could not bind a random port on tcp://%s: %s. Check that the "
                            + "hostname is an address of this machine.", config.hostname(), c), c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ConnectorException("interrupted while waiting for the Mooncake sender listener", e);
        }
        synchronized (lock) {
            sideChannelPort = port;
        }
        LOG.info("Mooncake sender listening on tcp://{}:{}", config.hostname(), port);
    }

    /**
     * Replaces the handler of side-channel messages (by default the send path,
     * {@code send_kv_to_decode}); tests use it to observe raw messages. May be called before or
     * after {@link #registerKvCaches}; messages already queued use the handler current when they run.
     */
    void setSideChannelHandler(SideChannelHandler handler) {
        this.sideChannelHandler = Objects.requireNonNull(handler, "handler");
    }

    /** The handler now installed: a replacement, or the send path (null before registration). */
    SideChannelHandler sideChannelHandler() {
        SideChannelHandler h = sideChannelHandler;
        return h != null ? h : sender;
    }

    /**
     * The producer's sender loop ({@code mooncake-p-sender-0}): the one thread on which handlers run
     * and all producer state is confined. Submit tasks that touch that state here.
     *
     * @throws IllegalStateException before the listener started, after close, or on a consumer
     */
    Executor senderLoop() {
        synchronized (lock) {
            if (listener == null || closed) {
                throw new IllegalStateException("no sender loop: " + (closed ? "worker is closed"
                        : isKvConsumer ? "kv_consumer workers have none" : "KV caches are not registered yet"));
            }
            return listener.senderLoop();
        }
    }

    /** {@return the ROUTER port decode workers connect to; 0 before registration and on consumers} */
    public int sideChannelPort() {
        synchronized (lock) {
            return sideChannelPort;
        }
    }

    /** Counters of the side-channel listener; all zero when there is none. */
    ListenerStats listenerStats() {
        synchronized (lock) {
            return listener == null ? new ListenerStats(0, 0, 0, 0, 0, 0, 0, 0) : listener.stats();
        }
    }

    /** {@return the registration, or null before {@link #registerKvCaches} succeeded} */
    public KvRegistration registration() {
        synchronized (lock) {
            return registration;
        }
    }

    /** The plan that was registered, or null before {@link #registerKvCaches} succeeded. */
    RegistrationPlan registeredPlan() {
        synchronized (lock) {
            return registeredPlan;
        }
    }

    /** {@return the engine's RPC port (vLLM's {@code rpc_port})} */
    public int rpcPort() {
        return rpcPort;
    }

    /** The engine; owned by the caller. */
    TransferEngine engine() {
        return engine;
    }

    /** {@return the configuration this worker runs with} */
    public MooncakeConnectorConfig config() {
        return config;
    }

    KvCacheConfig kvCacheConfig() {
        return kvCacheConfig;
    }

    /** {@return vLLM's {@code is_kv_producer}} */
    public boolean isKvProducer() {
        return isKvProducer;
    }

    /** {@return vLLM's {@code is_kv_consumer}} */
    public boolean isKvConsumer() {
        return isKvConsumer;
    }

    // ------------------------------------------------------------------ per-step API

    /**
     * vLLM's {@code start_load_kv}: hands this step's pulls to the receiver loop and this step's
     * sends ({@code reqs_to_send}, {@code reqs_not_processed}) to the sender loop, and returns at
     * once. Errors inside (and calls before {@link #registerKvCaches}) are logged and counted
     * ({@link #backgroundErrorCount()}), never dropped.
     *
     * @param metadata this step's connector metadata from the scheduler
     */
    public void startLoadKv(MooncakeConnectorMetadata metadata) {
        Objects.requireNonNull(metadata, "metadata");
        if (!isKvProducer && !metadata.reqsToRecv().isEmpty()) {
            KvReceiver r = receiver;
            if (r == null) {
                backgroundErrors.report("startLoadKv", new IllegalStateException(
                        "startLoadKv with pulls before registerKvCaches (or after close); pulls dropped: "
                                + metadata.reqsToRecv().keySet()));
            } else {
                r.post("receiver loop", () -> r.startLoadKv(metadata.reqsToRecv()));
            }
        }
        if (!metadata.layerwiseChunks().isEmpty()) {
            layerwiseForwardOpen = true;
        }
        if (!isKvConsumer && (!metadata.reqsToSend().isEmpty() || !metadata.reqsNotProcessed().isEmpty()
                || !metadata.layerwiseChunks().isEmpty())) {
            KvSender s = sender;
            Executor loop = senderLoopOrNull();
            if (s == null || loop == null) {
                backgroundErrors.report("startLoadKv", new IllegalStateException(
                        "startLoadKv with sends before registerKvCaches (or after close); sends dropped: "
                                + metadata.reqsToSend().keySet()));
            } else {
                try {
                    // through the queue of the layer hooks: after the last pass's, before the next pass's
                    s.offerFromModelRunner(backgroundErrors.guarded("sender loop", () -> s.recordSendReqs(metadata)),
                            true);
                } catch (RejectedExecutionException e) {
                    backgroundErrors.report("startLoadKv", e);
                }
            }
        }
    }

    /**
     * vLLM's {@code save_kv_layer}, called by the model runner after attention layer
     * {@code layerName} has written this step's KV (for GPU caches: once that write is complete on
     * the device). With {@code layerwise_push} on, P starts writing that layer of this step's
     * prefill chunks ({@link MooncakeConnectorMetadata#layerwiseChunks()}) to every D whose pull has
     * arrived; a pull that arrives later gets the layers saved so far at once. Returns at once; a
     * no-op on D, with {@code layerwise_push} off, or when no step since the last
     * {@link #waitForSave} named chunks (nothing is handed to the sender loop then: a plain or
     * decode-only step costs the model runner no thread hand-off per layer).
     *
     * @param layerName the layer's name, as in the KV-cache tensors map
     */
    public void saveKvLayer(String layerName) {
        Objects.requireNonNull(layerName, "layerName");
        postLayerwise("saveKvLayer", s -> s.onLayerSaved(layerName));
    }

    /**
     * vLLM's {@code wait_for_save}, called at the end of the forward pass: the layers of this step's
     * chunks that {@link #saveKvLayer} did not name are pushed now, and the chunk that ends a prompt
     * lets P answer D ({@code FINISH}) as soon as its last byte landed. Does not wait for the writes
     * (D learns of them through the side channel); a no-op where {@link #saveKvLayer} is.
     */
    public void waitForSave() {
        if (postLayerwise("waitForSave", KvSender::onForwardDone)) {
            layerwiseForwardOpen = false;
        }
    }

    /** Hook calls handed to the sender loop by {@link #saveKvLayer} / {@link #waitForSave} (tests). */
    long layerHookPosts() {
        return layerHookPosts.sum();
    }

    /**
     * Sender-loop tasks the model runner's hand-offs (layer hooks, a step's metadata) woke the loop
     * with: fewer than hook calls while layer-wise writes run (tests).
     */
    long layerHookWakeups() {
        KvSender s = sender;
        return s == null ? 0 : s.layerHookWakeups();
    }

    /** Posts a layer hook to the sender loop; true when a step had named chunks (posted, or reported as failed). */
    private boolean postLayerwise(String what, java.util.function.Consumer<KvSender> action) {
        if (isKvConsumer || !config.layerwisePush() || !layerwiseForwardOpen) {
            // no chunk since the last waitForSave: the sender loop would find nothing to do (and the
            // worker's lock is not taken on the model runner's thread once per layer)
            return false;
        }
        KvSender s = sender;
        Executor loop = senderLoopOrNull();
        if (s == null || loop == null) {
            backgroundErrors.report(what, new IllegalStateException(what
                    + " before registerKvCaches (or after close); ignored"));
            return true;
        }
        layerHookPosts.increment();
        try {
            // queued in call order; the loop is woken only when no layer-wise write's result will run it
            s.offerFromModelRunner(backgroundErrors.guarded("sender loop", () -> action.accept(s)), false);
        } catch (RejectedExecutionException e) {
            backgroundErrors.report(what, e);
        }
        return true;
    }

    private Executor senderLoopOrNull() {
        synchronized (lock) {
            return listener == null || closed ? null : listener.senderLoop();
        }
    }

    /**
     * vLLM's {@code get_finished}: the P requests whose blocks may be freed (sent, or expired after
     * the abort timeout) and the D requests whose load ended (received or failed) since the last
     * call. Waits briefly for P's sender loop (expiry is checked there); D's finished loads are
     * taken from a queue the moment their answer was read, without waiting for a loop; never null.
     *
     * @return the request ids that finished sending and receiving
     */
    public FinishedRequests getFinished() {
        Set<String> sending = Set.of();
        Set<String> recving = Set.of();
        KvSender s = sender;
        Executor sl = senderLoopOrNull();
        if (!isKvConsumer && s != null && sl != null) {
            sending = onLoop(sl, s::fetchFinishedSending, "fetch_finished_sending_reqs");
        }
        KvReceiver r = receiver;
        if (!isKvProducer && r != null) {
            recving = r.fetchFinishedRecving(); // a thread-safe queue: no wait for D's loops (issue 13)
        }
        if (LOG.isDebugEnabled() && (!sending.isEmpty() || !recving.isEmpty())) {
            LOG.debug("Rank {}, get_finished: {} requests done sending and {} requests done recving", config.tpRank(),
                    sending.size(), recving.size());
        }
        return new FinishedRequests(sending, recving);
    }

    /**
     * Registers a wake-up that tells the embedder, without polling, that {@link #getFinished()} (and
     * so {@link #getTransferResults()} and {@link #getBlockIdsWithLoadErrors()}) has something new:
     * on D, each load that ended (received, failed, or timed out; its failed blocks are queued
     * first); on P, each request whose blocks may be freed (sent to every D that needed it,
     * finished while not pending a send, or expired after the abort timeout: a timer on the sender
     * loop fires at the earliest expiry deadline, so no embedder needs a timed wait for expiry).
     * Replaces the previous listener; {@code null} removes it. May be called at any time, before or
     * after {@link #registerKvCaches}.
     *
     * <p>Contract: the listener runs on a connector thread ({@code mooncake-d-io-0},
     * {@code mooncake-d-receiver-0} or {@code mooncake-p-sender-0}), so it must be cheap and must
     * not block nor call back into this worker: signal a condition, offer a token, unpark a thread.
     * It runs after the event is visible to {@code getFinished}, so no wake-up is lost: an embedder
     * that registers, then checks {@code getFinished}, then waits on its own condition until the
     * listener signals it, never misses an event. It may run spuriously (a later {@code getFinished}
     * may find nothing, e.g. an event an earlier call already drained) and once per event (several
     * per step). What it throws is caught, counted with the background errors and logged once per
     * distinct error; it never stops a connector thread.
     *
     * @param listener the wake-up, or null for none
     */
    public void setFinishedListener(Runnable listener) {
        finishedListener = listener;
    }

    /** Runs the embedder's finished listener, if any, on the calling connector thread; never throws. */
    private void signalFinished() {
        Runnable l = finishedListener;
        if (l != null) {
            try {
                l.run();
            } catch (RuntimeException | Error e) {
                backgroundErrors.report("finished listener", e);
            }
        }
    }

    /**
     * Waits for a task posted to a loop, at most the loop-call timeout and never past the start of
     * {@link #close()} (which may stop the loop with the task still queued).
     *
     * @throws RejectedExecutionException when closing began first
     */
    private <T> T awaitLoop(CompletableFuture<T> f) throws ExecutionException, TimeoutException,
            InterruptedException {
        CompletableFuture.anyOf(f, closing).get(loopCallTimeout.toMillis(), TimeUnit.MILLISECONDS);
        if (!f.isDone()) {
            throw new RejectedExecutionException("the Mooncake connector worker is closing");
        }
        return f.get();
    }

    private Set<String> onLoop(Executor loop, Supplier<Set<String>> task, String what) {
        try {
            return awaitLoop(CompletableFuture.supplyAsync(task, loop));
        } catch (RejectedExecutionException e) {
            return Set.of(); // closing
        } catch (ExecutionException e) {
            backgroundErrors.report(what, e.getCause());
            return Set.of();
        } catch (TimeoutException e) {
            backgroundErrors.report(what, new IllegalStateException(what + " did not run within "
                    + loopCallTimeout.toMillis() + " ms; is the loop blocked?", e));
            return Set.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Set.of();
        }
    }

    /**
     * vLLM's {@code get_transfer_results}: {@link #getFinished()} plus the D requests whose load
     * failed and that are reported per request (see {@link KvConnectorTransferResults}).
     *
     * @return the request ids that finished sending and receiving
     */
    public KvConnectorTransferResults getTransferResults() {
        synchronized (failedNotYetFinished) {
            FinishedRequests f = getFinished();
            // The receiver queues a failure before it marks the request finished (in one call), so an id
            // polled here belongs to this fetch's finished set or to a later one: hold it until its
            // finish is reported, so that failedRecving is always reported with (and within) finishedRecving.
            KvReceiver r = receiver;
            if (r != null) {
                String id;
                while ((id = r.failedRecvReqs.poll()) != null) {
                    failedNotYetFinished.add(id);
                }
            }
            Set<String> failed = new java.util.LinkedHashSet<>();
            for (String id : f.finishedRecving()) {
                if (failedNotYetFinished.remove(id)) {
                    failed.add(id);
                }
            }
            return new KvConnectorTransferResults(f.finishedSending(), f.finishedRecving(), failed);
        }
    }

    /**
     * vLLM's {@code get_block_ids_with_load_errors}: the local block ids of failed loads since the
     * last call (models whose KV groups are all full attention; see {@link KvConnectorTransferResults}).
     *
     * @return the block ids, possibly empty
     */
    public Set<Integer> getBlockIdsWithLoadErrors() {
        Set<Integer> out = new java.util.LinkedHashSet<>();
        KvReceiver r = receiver;
        if (r != null) {
            Set<Integer> ids;
            while ((ids = r.invalidBlockIds.poll()) != null) {
                out.addAll(ids);
            }
        }
        return out;
    }

    /**
     * {@return vLLM's {@code get_kv_connector_stats}: empty when nothing was recorded, else the stats since the last call}
     */
    public Optional<MooncakeKvConnectorStats> getKvConnectorStats() {
        if (xferStats.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(xferStats.cloneAndReset());
    }

    /** Exceptions of background work (loops, transfer pool, pull I/O) so far; each was logged. */
    long backgroundErrorCount() {
        return backgroundErrors.count();
    }

    /** {@return the port of the bootstrap server this worker launched, or -1 when it launched none} */
    public int bootstrapServerPort() {
        synchronized (lock) {
            return bootstrapServer == null ? -1 : bootstrapServer.port();
        }
    }

    /**
     * The base URL decode workers use as {@code remote_bootstrap_addr} for this engine
     * ({@code http://<hostname>:<bound port>}), when this worker launched the bootstrap server.
     *
     * @return the URL, or empty when this worker launched no bootstrap server
     */
    public Optional<String> bootstrapServerUrl() {
        int port = bootstrapServerPort();
        return port > 0 ? Optional.of(BootstrapAddresses.httpUrl(config.hostname(), port)) : Optional.empty();
    }

    /** The bootstrap server this worker launched, if any (tests; embedders use its address). */
    Optional<MooncakeBootstrapServer> bootstrapServer() {
        synchronized (lock) {
            return Optional.ofNullable(bootstrapServer);
        }
    }

    /** The side-channel listener once started, else null (tests). */
    SenderListener listenerOrNull() {
        synchronized (lock) {
            return listener;
        }
    }

    /** The receive path once registered, else null (tests). */
    KvReceiver receiverOrNull() {
        return receiver;
    }

    /** The send path once registered, else null (tests; its state is the sender loop's). */
    KvSender senderOrNull() {
        return sender;
    }

    /**
     * The side channel's cumulative counters (limits hit, error replies, dropped messages, background
     * errors); all zero before registration. Reads counters only: never waits on the worker's loops.
     *
     * @return a snapshot of the counters
     */
    public WorkerCounters counters() {
        KvSender s = sender;
        KvReceiver r = receiver;
        ListenerStats l = listenerStats();
        return new WorkerCounters(s == null ? 0 : s.limitRejections(), s == null ? 0 : s.errorReplies(),
                l.malformedMessages(), l.repliesDropped(), l.backlogPauses(),
                s == null ? 0 : s.placeholdersExpired(), s == null ? 0 : s.staleWaves(),
                r == null ? 0 : r.channels().handshakeRetries(), backgroundErrors.count());
    }

    /** Side-channel facts of the send and receive paths, for tests and diagnostics; waits on the loops. */
    WorkerDiagnostics diagnostics() {
        int pending = -1;
        int activePulls = -1;
        long errorReplies = 0;
        long placeholders = 0;
        long limitRejections = 0;
        long staleWaves = 0;
        long queuedForShare = 0;
        KvSender s = sender;
        Executor sl = senderLoopOrNull();
        if (s != null && sl != null) {
            try {
                int[] v = awaitLoop(CompletableFuture.supplyAsync(
                        () -> new int[] {s.pendingTransfers(), s.activePulls()}, sl));
                pending = v[0];
                activePulls = v[1];
            } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
                LOG.debug("diagnostics: sender loop did not answer", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            errorReplies = s.errorReplies();
            placeholders = s.placeholdersExpired();
            limitRejections = s.limitRejections();
            staleWaves = s.staleWaves();
            queuedForShare = s.wavesQueuedForShare();
        }
        KvReceiver r = receiver;
        long retries = r == null ? 0 : r.channels().handshakeRetries();
        long connections = r == null ? 0 : r.channels().connectionsOpened();
        long reconnects = r == null ? 0 : r.channels().handshakeReconnects();
        int dealers = r == null ? 0 : r.channels().activePulls();
        long reResolutions = 0;
        if (r != null) {
            try {
                reResolutions = awaitLoop(CompletableFuture.supplyAsync(r::reResolutions, r.loop()));
            } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
                LOG.debug("diagnostics: receiver loop did not answer", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return new WorkerDiagnostics(pending, activePulls, errorReplies, placeholders, dealers, connections, retries, reconnects,
                backgroundErrors.count(), limitRejections, staleWaves, queuedForShare, reResolutions);
    }

    /**
     * Whether every background thread of this worker is alive and serving (issue 9): the side-channel
     * listener and sender loop on P, the receiver loop and pull I/O thread on D. A thread that died
     * was logged once at ERROR and counted; one that was recreated leaves the worker healthy, one that
     * could not be makes it unhealthy with the reason.
     * Cheap and safe from any thread.
     *
     * @return the health now: healthy or not, the problems, loop deaths and recoveries
     */
    public WorkerHealth health() {
        WorkerHealth h = healthMonitor.snapshot();
        List<String> extra = new java.util.ArrayList<>();
        SenderListener l;
        KvReceiver r;
        boolean isClosed;
        synchronized (lock) {
            l = listener;
            r = receiver;
            isClosed = closed;
        }
        if (!isClosed) {
            if (l != null && !l.alive()) {
                extra.add("mooncake-p-listener-0 is not running");
            }
            if (l != null && l.senderLoop().isShutdown()) {
                extra.add("mooncake-p-sender-0 is shut down");
            }
            if (r != null && !r.channels().alive()) {
                extra.add("mooncake-d-io-0 is not running");
            }
            if (r != null && r.loop().isShutdown()) {
                extra.add("mooncake-d-receiver-0 is shut down");
            }
        }
        if (extra.isEmpty()) {
            return h;
        }
        List<String> all = new java.util.ArrayList<>(h.problems());
        for (String e : extra) {
            if (!all.contains(e)) {
                all.add(e);
            }
        }
        return new WorkerHealth(false, all, h.loopDeaths(), h.loopRecoveries());
    }

    /**
     * vLLM's {@code shutdown()}: stops the listener, sender loop and transfer pool, the receiver
     * loop and its DEALER sockets, and the bootstrap server this worker launched. Idempotent;
     * leaves no thread; registered memory stays registered (close the engine for that).
     */
    @Override
    public void close() {
        SenderListener l;
        KvSender s;
        KvReceiver r;
        MooncakeBootstrapServer b;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            closing.complete(null);
            l = listener;
            s = sender;
            r = receiver;
            b = bootstrapServer;
        }
        if (r != null) {
            r.close();
        }
        if (l != null && s != null) {
            // no write may still run once the ROUTER's port refuses D (see PullChannels)
            SenderListener.quiesce(s, "the worker is closing", 10_000);
        }
        if (l != null) {
            l.close();
        }
        if (s != null) {
            s.close();
        }
        if (b != null) {
            b.close();
        }
    }

    /** Options of a {@link MooncakeConnectorWorker}. */
    public static final class Builder {
        private final MooncakeConnectorConfig config;
        private final TransferEngine engine;
        private final KvCacheConfig kvCacheConfig;
        private int physicalBlocksPerLogicalBlock = 1;
        private Supplier<OptionalLong> memlockLimit = ResourceLimits::effectiveMemlockLimit;
        private SideChannelHandler sideChannelHandler;
        private LongSupplier nanoClock = System::nanoTime;
        private boolean mla;
        private int totalNumKvHeads = Integer.MAX_VALUE;
        private String bootstrapBindHost = MooncakeBootstrapServer.DEFAULT_HOST;
        private Duration receiveTimeoutMargin = Duration.ofSeconds(60);
        private Duration handshakeTimeout = Duration.ofSeconds(1);
        private Duration loopCallTimeout = Duration.ofSeconds(30);
        private SideChannelLimits sideChannelLimits = SideChannelLimits.DEFAULTS;

        private Builder(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig) {
            this.config = Objects.requireNonNull(config, "config");
            this.engine = Objects.requireNonNull(engine, "engine");
            this.kvCacheConfig = Objects.requireNonNull(kvCacheConfig, "kvCacheConfig");
        }

        /**
         * {@return vLLM's {@code _physical_blocks_per_logical_kv_block} (kernel blocks per logical block); default 1}
         *
         * @param n kernel blocks per logical block
         */
        public Builder physicalBlocksPerLogicalBlock(int n) {
            if (n <= 0) {
                throw new IllegalArgumentException("physicalBlocksPerLogicalBlock must be positive, got " + n);
            }
            this.physicalBlocksPerLogicalBlock = n;
            return this;
        }

        /**
         * {@return where the soft RLIMIT_MEMLOCK comes from (tests pin it); default getrlimit(2), unlimited with CAP_IPC_LOCK}
         *
         * @param source supplies the soft limit, empty when unlimited
         */
        public Builder memlockLimit(Supplier<OptionalLong> source) {
            this.memlockLimit = Objects.requireNonNull(source, "source");
            return this;
        }

        /** Replaces the side-channel handler (tests); default: the send path ({@code send_kv_to_decode}). */
        Builder sideChannelHandler(SideChannelHandler handler) {
            this.sideChannelHandler = Objects.requireNonNull(handler, "handler");
            return this;
        }

        /** The monotonic clock of P's expiry (vLLM's {@code perf_counter}), in nanoseconds; default {@link System#nanoTime}. */
        Builder nanoClock(LongSupplier clock) {
            this.nanoClock = Objects.requireNonNull(clock, "clock");
            return this;
        }

        /**
         * Model facts of the heterogeneous-TP math (spec §6.10): whether the model uses MLA, and its
         * total number of KV heads. Default: not MLA, and as many heads as any TP size (no head
         * replication).
         *
         * @param useMla          whether the model uses MLA (one latent KV shared by all heads)
         * @param totalNumKvHeads the model's total number of KV heads (all ranks)
         * @return this builder
         */
        public Builder model(boolean useMla, int totalNumKvHeads) {
            if (totalNumKvHeads < 1) {
                throw new IllegalArgumentException("totalNumKvHeads must be >= 1, got " + totalNumKvHeads);
            }
            this.mla = useMla;
            this.totalNumKvHeads = totalNumKvHeads;
            return this;
        }

        /**
         * {@return the address a launched bootstrap server binds; default {@value MooncakeBootstrapServer#DEFAULT_HOST} as vLLM}
         *
         * @param host the address to bind
         */
        public Builder bootstrapBindHost(String host) {
            this.bootstrapBindHost = Objects.requireNonNull(host, "host");
            return this;
        }

        /**
         * D's receive timeout is the abort timeout plus this margin (vLLM: 60 s, "let P time out first").
         *
         * @param margin added to the abort timeout
         * @return this builder
         */
        public Builder receiveTimeoutMargin(Duration margin) {
            if (margin.isNegative()) {
                throw new IllegalArgumentException("receiveTimeoutMargin must be >= 0, got " + margin);
            }
            this.receiveTimeoutMargin = margin;
            return this;
        }

        /**
         * How long a new DEALER connection may take to complete its ZMTP handshake before it is
         * replaced (default 1 s; the n-th attempt waits n times this).
         *
         * @param timeout a new connection's handshake deadline
         * @return this builder
         */
        public Builder handshakeTimeout(Duration timeout) {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("handshakeTimeout must be positive, got " + timeout);
            }
            this.handshakeTimeout = timeout;
            return this;
        }

        /**
         * Bounds on what side-channel peers can make this worker spend: maximum ZMQ message sizes,
         * pending pulls and placeholders, the transfer-pool share of one D (see
         * {@code docs/reliability.md}); default {@link SideChannelLimits#DEFAULTS}.
         *
         * @param limits the side-channel bounds
         * @return this builder
         */
        public Builder sideChannelLimits(SideChannelLimits limits) {
            this.sideChannelLimits = Objects.requireNonNull(limits, "limits");
            return this;
        }

        /** {@return initialises the engine and returns the worker} */
        public MooncakeConnectorWorker build() {
            return new MooncakeConnectorWorker(this);
        }
    }
}
