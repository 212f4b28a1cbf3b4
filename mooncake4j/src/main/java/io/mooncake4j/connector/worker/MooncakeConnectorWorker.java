package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.connector.worker.send.KvSender;
import io.mooncake4j.connector.worker.send.ListenerStats;
import io.mooncake4j.connector.worker.send.SenderListener;
import io.mooncake4j.connector.worker.send.SideChannelHandler;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.ResourceLimits;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
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
    private final boolean mla;
    private final int totalNumKvHeads;
    private final Duration receiveTimeoutMargin;
    private final Duration handshakeTimeout;
    private final TransferTopology topology;
    private final MooncakeKvConnectorStats xferStats = new MooncakeKvConnectorStats();
    private final BackgroundErrors backgroundErrors = new BackgroundErrors(LOG);
    private final HealthMonitor healthMonitor = new HealthMonitor();
    private final SideChannelLimits sideChannelLimits;
    private final String kvLayout;
    /** P's side: the side-channel ROUTER, the send path, the bootstrap server; idle on a consumer. */
    private final ProducerSide producer;
    private volatile KvReceiver receiver;
    /** The embedder's wake-up for new getFinished results ({@link #setFinishedListener}); null when none. */
    private volatile Runnable finishedListener;
    /** Failed pulls polled before their finish was fetched (guarded by itself; see getTransferResults). */
    private final Set<String> failedNotYetFinished = new java.util.LinkedHashSet<>();

    private final Object lock = new Object();
    // guarded by lock
    private KvRegistration registration;
    private RegistrationPlan registeredPlan;
    private boolean closed;
    /** The embedder's calls that wait on a loop: bounded, and never past the start of close(). */
    private final LoopCalls loopCalls;

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
        this.mla = b.mla;
        this.totalNumKvHeads = b.totalNumKvHeads;
        this.receiveTimeoutMargin = b.receiveTimeoutMargin;
        this.handshakeTimeout = b.handshakeTimeout;
        this.loopCalls = new LoopCalls(b.loopCallTimeout, backgroundErrors);
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
        this.producer = new ProducerSide(config, engine, kvCacheConfig, topology, physicalBlocksPerLogicalBlock,
                b.nanoClock, b.bootstrapBindHost, sideChannelLimits, xferStats, backgroundErrors, healthMonitor,
                b.sideChannelHandler, this::signalFinished, b.kvLayout);
        this.kvLayout = b.kvLayout;
        LOG.debug("Mooncake Transfer Engine initialized at {}:{}", config.hostname(), rpcPort);
    }

    /** {@return what this rank's KV blocks mean ({@link Builder#kvLayout}), or null} */
    public String kvLayout() {
        return kvLayout;
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
        EngineRegistration.register(engine, plan, config.registrationRetries());
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
        producer.launchBootstrapServerIfSelected();
        producer.start(reg);
        producer.registerWithBootstrap();
        return reg;
    }

    // ------------------------------------------------------------------ start-up of the loops

    private void startReceiver(KvRegistration reg) {
        long receiveTimeout = config.abortRequestTimeout().plus(receiveTimeoutMargin).toNanos();
        KvReceiver.Registration announced = new KvReceiver.Registration(reg.kvCachesBaseAddr(),
                reg.blockLenPerLayer(), reg.kvBlockLenPerLayer(), reg.registeredLayerNames(),
                reg.registeredLayerIndices(), reg.registeredGroupIndices());
        KvReceiver r;
        try {
            r = new KvReceiver(new KvReceiver.MooncakeConnectorWorkerView(config.hostname(), rpcPort, config.tpRank(),
                    config.tpSize(), config.ppRank(), config.ppSize(), announced, kvLayout), topology,
                    kvCacheConfig.hasNonFullAttentionGroup(), xferStats.recorder(), backgroundErrors, receiveTimeout,
                    handshakeTimeout.toNanos(), new BootstrapClient(), sideChannelLimits.channel(), healthMonitor);
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

    /**
     * Replaces the handler of side-channel messages (by default the send path,
     * {@code send_kv_to_decode}); tests use it to observe raw messages. May be called before or
     * after {@link #registerKvCaches}; messages already queued use the handler current when they run.
     */
    void setSideChannelHandler(SideChannelHandler handler) {
        producer.setSideChannelHandler(handler);
    }

    /** The handler now installed: a replacement, or the send path (null before registration). */
    SideChannelHandler sideChannelHandler() {
        return producer.sideChannelHandler();
    }

    /**
     * The producer's sender loop ({@code mooncake-p-sender-0}): the one thread on which handlers run
     * and all producer state is confined. Submit tasks that touch that state here.
     *
     * @throws IllegalStateException before the listener started, after close, or on a consumer
     */
    Executor senderLoop() {
        return producer.senderLoop();
    }

    /** {@return the ROUTER port decode workers connect to; 0 before registration and on consumers} */
    public int sideChannelPort() {
        return producer.sideChannelPort();
    }

    /** Counters of the side-channel listener; all zero when there is none. */
    ListenerStats listenerStats() {
        return producer.listenerStats();
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
            producer.openLayerwiseForward();
        }
        if (!isKvConsumer && (!metadata.reqsToSend().isEmpty() || !metadata.reqsNotProcessed().isEmpty()
                || !metadata.layerwiseChunks().isEmpty())) {
            KvSender s = producer.sender();
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
        producer.postLayerwise("saveKvLayer", s -> s.onLayerSaved(layerName));
    }

    /**
     * vLLM's {@code wait_for_save}, called at the end of the forward pass: the layers of this step's
     * chunks that {@link #saveKvLayer} did not name are pushed now, and the chunk that ends a prompt
     * lets P answer D ({@code FINISH}) as soon as its last byte landed. Does not wait for the writes
     * (D learns of them through the side channel); a no-op where {@link #saveKvLayer} is.
     */
    public void waitForSave() {
        producer.postLayerwiseForwardDone();
    }

    /** Hook calls handed to the sender loop by {@link #saveKvLayer} / {@link #waitForSave} (tests). */
    long layerHookPosts() {
        return producer.layerHookPosts();
    }

    /**
     * Sender-loop tasks the model runner's hand-offs (layer hooks, a step's metadata) woke the loop
     * with: fewer than hook calls while layer-wise writes run (tests).
     */
    long layerHookWakeups() {
        KvSender s = producer.sender();
        return s == null ? 0 : s.layerHookWakeups();
    }

    private Executor senderLoopOrNull() {
        return producer.senderLoopOrNull();
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
        KvSender s = producer.sender();
        Executor sl = senderLoopOrNull();
        if (!isKvConsumer && s != null && sl != null) {
            sending = loopCalls.onLoop(sl, s::fetchFinishedSending, "fetch_finished_sending_reqs");
        }
        KvReceiver r = receiver;
        if (!isKvProducer && r != null) {
            recving = r.fetchFinishedRecving(); // a thread-safe queue: no wait for D's loops (the answer was recorded where it was read)
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
        return producer.bootstrapServerPort();
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
        return producer.bootstrapServer();
    }

    /** The side-channel listener once started, else null (tests). */
    SenderListener listenerOrNull() {
        return producer.listenerOrNull();
    }

    /** The receive path once registered, else null (tests). */
    KvReceiver receiverOrNull() {
        return receiver;
    }

    /** The send path once registered, else null (tests; its state is the sender loop's). */
    KvSender senderOrNull() {
        return producer.sender();
    }

    /**
     * The side channel's cumulative counters (limits hit, error replies, dropped messages, background
     * errors, self-aimed refusals, answers dropped by reason, peers dropped, the bootstrap server's closed
     * connections); all zero before registration. Reads counters only: never waits on the worker's loops.
     *
     * @return a snapshot of the counters
     */
    public WorkerCounters counters() {
        KvSender s = producer.sender();
        KvReceiver r = receiver;
        ListenerStats l = listenerStats();
        ListenerStats.Answers a = l.answers();
        WorkerCounters.BootstrapClosed boot = producer.bootstrapServer()
                .map(b -> new WorkerCounters.BootstrapClosed(b.evictedConnections(), b.refusedConnections(),
                        b.expiredConnections()))
                .orElse(WorkerCounters.BootstrapClosed.NONE);
        return new WorkerCounters(s == null ? 0 : s.limitRejections(), s == null ? 0 : s.errorReplies(),
                l.malformedMessages(), l.repliesDropped(), l.backlogPauses(),
                s == null ? 0 : s.placeholdersExpired(), s == null ? 0 : s.staleWaves(),
                r == null ? 0 : r.channels().handshakeRetries(), backgroundErrors.count(),
                s == null ? 0 : s.selfAimedRefusals(), l.peersDropped(),
                new WorkerCounters.AnswersDropped(a.droppedProtocol(), a.droppedPeerGone(), a.droppedQueueFull(),
                        a.droppedClosing()), boot);
    }

    /** Side-channel facts of the send and receive paths, for tests and diagnostics; waits on the loops. */
    WorkerDiagnostics diagnostics() {
        return WorkerDiagnostics.of(producer.sender(), senderLoopOrNull(), receiver, backgroundErrors, loopCalls);
    }

    /**
     * Whether every background thread of this worker is alive and serving: the side-channel
     * listener and sender loop on P, the receiver loop and pull I/O thread on D. A thread that died
     * was logged once at ERROR and counted; one that was recreated leaves the worker healthy, one that
     * could not be makes it unhealthy with the reason.
     * Cheap and safe from any thread.
     *
     * @return the health now: healthy or not, the problems, loop deaths and recoveries
     */
    public WorkerHealth health() {
        KvReceiver r;
        boolean isClosed;
        synchronized (lock) {
            r = receiver;
            isClosed = closed;
        }
        HealthMonitor.Snapshot s = healthMonitor.snapshot();
        WorkerHealth h = new WorkerHealth(s.healthy(), s.problems(), s.loopDeaths(), s.loopRecoveries());
        return isClosed ? h : ThreadLiveness.check(h, producer.listenerOrNull(), r);
    }

    /**
     * vLLM's {@code shutdown()}: stops the listener, sender loop and transfer pool, the receiver
     * loop and its DEALER sockets, and the bootstrap server this worker launched. Idempotent;
     * leaves no thread; registered memory stays registered (close the engine for that).
     */
    @Override
    public void close() {
        KvReceiver r;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            loopCalls.closing();
            r = receiver;
        }
        if (r != null) {
            r.close();
        }
        producer.close();
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
        private String kvLayout;

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

        /**
         * What this rank's KV blocks mean (model weights, dtype, shapes, tokenizer, block size; the node's
         * fingerprint), default none. A producer registers it with the bootstrap server
         * ({@link io.mooncake4j.connector.bootstrap.RegisterWorkerPayload#KV_LAYOUT_KEY}, in its {@code /query}
         * entry), so that a decode node can compare it with its own before any KV moves.
         *
         * @param layout the layout string, at most 1024 characters, or null for none
         * @return this builder
         */
        public Builder kvLayout(String layout) {
            if (layout != null && (layout.isEmpty() || layout.length() > 1024)) {
                throw new IllegalArgumentException("kvLayout must have 1..1024 characters, got " + layout.length());
            }
            this.kvLayout = layout;
            return this;
        }

        /** {@return initialises the engine and returns the worker} */
        public MooncakeConnectorWorker build() {
            return new MooncakeConnectorWorker(this);
        }
    }
}
