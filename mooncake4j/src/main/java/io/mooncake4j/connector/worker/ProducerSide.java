package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.connector.worker.send.KvSender;
import io.mooncake4j.connector.worker.send.ListenerStats;
import io.mooncake4j.connector.worker.send.Quiesce;
import io.mooncake4j.connector.worker.send.SenderListener;
import io.mooncake4j.connector.worker.send.SideChannelHandler;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.memory.KvCacheConfig;
import java.io.IOException;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A worker's producer side: the side-channel ROUTER ({@link SenderListener}), the send path
 * ({@link KvSender}) it hands D's pulls to, the bootstrap server this rank may launch and the
 * registration of the ROUTER's address with it. Idle on a {@code kv_consumer} worker.
 *
 * <p>Threads: {@link #start}, {@link #launchBootstrapServerIfSelected} and {@link #registerWithBootstrap}
 * run on the caller of {@code registerKvCaches}; the accessors and {@link #close()} are safe from any
 * thread (the state is guarded by this object's lock, the send path published through a volatile).
 */
final class ProducerSide {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeConnectorWorker.class);

    private final MooncakeConnectorConfig config;
    private final TransferEngine engine;
    private final KvCacheConfig kvCacheConfig;
    private final TransferTopology topology;
    private final int physicalBlocksPerLogicalBlock;
    private final LongSupplier nanoClock;
    private final String bootstrapBindHost;
    private final SideChannelLimits sideChannelLimits;
    private final MooncakeKvConnectorStats xferStats;
    private final BackgroundErrors backgroundErrors;
    private final HealthMonitor healthMonitor;
    private final Runnable onFinished;
    /** What this rank's KV blocks mean (registered with the bootstrap server), or null. */
    private final String kvLayout;
    // written by setSideChannelHandler, read on the sender-loop thread; null = the send path
    private volatile SideChannelHandler sideChannelHandler;
    // set once under lock before the loops accept work; read by the embedder's thread
    private volatile KvSender sender;
    /**
     * A step since the last {@code waitForSave} named layer-wise chunks (the model runner's thread:
     * {@code startLoadKv}, {@code saveKvLayer}, {@code waitForSave}); while false the layer hooks
     * post nothing.
     */
    private volatile boolean layerwiseForwardOpen;
    private final LongAdder layerHookPosts = new LongAdder();

    private final Object lock = new Object();
    // guarded by lock
    private SenderListener listener;
    private MooncakeBootstrapServer bootstrapServer;
    private int sideChannelPort;
    private boolean closed;

    ProducerSide(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig,
            TransferTopology topology, int physicalBlocksPerLogicalBlock, LongSupplier nanoClock,
            String bootstrapBindHost, SideChannelLimits sideChannelLimits, MooncakeKvConnectorStats xferStats,
            BackgroundErrors backgroundErrors, HealthMonitor healthMonitor, SideChannelHandler sideChannelHandler,
            Runnable onFinished, String kvLayout) {
        this.kvLayout = kvLayout;
        this.config = config;
        this.engine = engine;
        this.kvCacheConfig = kvCacheConfig;
        this.topology = topology;
        this.physicalBlocksPerLogicalBlock = physicalBlocksPerLogicalBlock;
        this.nanoClock = nanoClock;
        this.bootstrapBindHost = bootstrapBindHost;
        this.sideChannelLimits = sideChannelLimits;
        this.xferStats = xferStats;
        this.backgroundErrors = backgroundErrors;
        this.healthMonitor = healthMonitor;
        this.sideChannelHandler = sideChannelHandler;
        this.onFinished = onFinished;
    }

    /** Launches the bootstrap server when this rank is the one that serves it (vLLM's rule). */
    void launchBootstrapServerIfSelected() {
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
    void registerWithBootstrap() {
        String url = bootstrapBaseUrl();
        RegisterWorkerPayload payload = new RegisterWorkerPayload(config.engineId(), config.dpRank(), config.tpRank(),
                config.ppRank(), BootstrapAddresses.tcpAddress(config.hostname(), sideChannelPort()), kvLayout);
        try (BootstrapClient client = new BootstrapClient()) {
            client.register(url, payload, config.listenerReadyTimeout());
        }
        LOG.info("Registered {} with the Mooncake bootstrap server {}", payload, url);
    }

    /** Starts the ROUTER and the send path for {@code reg}; returns once the ROUTER listens. */
    void start(KvRegistration reg) {
        SenderListener l;
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("worker is closed");
            }
            try {
                l = new SenderListener(config.hostname(), () -> {
                    SideChannelHandler h = sideChannelHandler;
                    return h != null ? h : sender;
                }, sideChannelLimits.channel(), healthMonitor, () -> sender, SenderListener.POLL_MS);
            } catch (IOException e) {
                throw new ConnectorException("Mooncake sender listener could not be created: " + e, e);
            }
            listener = l;
            TransferPlanner planner = new TransferPlanner(topology, physicalBlocksPerLogicalBlock,
                    KvCacheLayouts.mambaGroups(kvCacheConfig));
            List<TransferRegion> local = planner.regions(KvReceiver.longs(reg.kvCachesBaseAddr()),
                    KvReceiver.longs(reg.blockLenPerLayer()), KvReceiver.longs(reg.kvBlockLenPerLayer()),
                    reg.registeredLayerNames(), KvReceiver.ints(reg.registeredLayerIndices()),
                    KvReceiver.ints(reg.registeredGroupIndices()), KvCacheLayouts.groupOfLayer(kvCacheConfig));
            KvSender s = new KvSender(config.engineId(), engine, xferStats.recorder(), backgroundErrors, l.senderLoop(),
                    config.numWorkers(), nanoClock, config.abortRequestTimeout().toNanos(), config.ppSize(), planner,
                    local, KvCacheLayouts.groupOfLayer(kvCacheConfig), KvCacheLayouts.layoutOfLayer(kvCacheConfig),
                    sideChannelLimits.channel(), config.layerwisePush(),
                    config.transferThreadNice());
            s.kvLayout(kvLayout);
            if (!config.isProducer()) {
                // kv_both (this side never starts on kv_consumer): the worker's own receiver pulls from its
                // own engine, where D's blocks live too
                s.acceptSelfAimedPulls();
            }
            s.onFinished(onFinished);
            sender = s;
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
     * after the start; messages already queued use the handler current when they run.
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
                        : config.isConsumer() ? "kv_consumer workers have none" : "KV caches are not registered yet"));
            }
            return listener.senderLoop();
        }
    }

    /** {@return the ROUTER port decode workers connect to; 0 before registration and on consumers} */
    int sideChannelPort() {
        synchronized (lock) {
            return sideChannelPort;
        }
    }

    /** Counters of the side-channel listener; all zero when there is none. */
    ListenerStats listenerStats() {
        synchronized (lock) {
            return listener == null ? ListenerStats.NONE : listener.stats();
        }
    }

    /** A step named layer-wise chunks: the layer hooks post to the sender loop until the forward pass ends. */
    void openLayerwiseForward() {
        layerwiseForwardOpen = true;
    }

    /** {@code waitForSave}: the forward pass ended (posted when a step had named chunks). */
    void postLayerwiseForwardDone() {
        if (postLayerwise("waitForSave", KvSender::onForwardDone)) {
            layerwiseForwardOpen = false;
        }
    }

    long layerHookPosts() {
        return layerHookPosts.sum();
    }

    /** Posts a layer hook to the sender loop; true when a step had named chunks (posted, or reported as failed). */
    boolean postLayerwise(String what, Consumer<KvSender> action) {
        if (config.isConsumer() || !config.layerwisePush() || !layerwiseForwardOpen) {
            // no chunk since the last waitForSave: the sender loop would find nothing to do (and the
            // lock is not taken on the model runner's thread once per layer)
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

    /** The sender loop, or null before the start and after close. */
    Executor senderLoopOrNull() {
        synchronized (lock) {
            return listener == null || closed ? null : listener.senderLoop();
        }
    }

    /** The send path once started, else null (its state is the sender loop's). */
    KvSender sender() {
        return sender;
    }

    /** The ROUTER once started, else null. */
    SenderListener listenerOrNull() {
        synchronized (lock) {
            return listener;
        }
    }

    /** The port of the bootstrap server this worker launched, or -1 when it launched none. */
    int bootstrapServerPort() {
        synchronized (lock) {
            return bootstrapServer == null ? -1 : bootstrapServer.port();
        }
    }

    Optional<MooncakeBootstrapServer> bootstrapServer() {
        synchronized (lock) {
            return Optional.ofNullable(bootstrapServer);
        }
    }

    /**
     * Ends every pull and waits for their writes, then closes the ROUTER (so that no write may still run
     * once its port refuses D: D fails a pull at once then), the transfer pool and the bootstrap server.
     * Idempotent; a start after it fails.
     */
    void close() {
        SenderListener l;
        KvSender s;
        MooncakeBootstrapServer b;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            l = listener;
            s = sender;
            b = bootstrapServer;
        }
        if (l != null && s != null) {
            Quiesce.await(s, "the worker is closing", 10_000);
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
}
