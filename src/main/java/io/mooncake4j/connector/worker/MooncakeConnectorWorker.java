package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.internal.sys.ResourceLimits;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryStorage;
import java.io.IOException;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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
 * the listener threads and the ZMQ context.
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
    public static final String NO_KV_CACHES_MESSAGE = "No KV cache tensors were registered with Mooncake.";

    private final MooncakeConnectorConfig config;
    private final TransferEngine engine;
    private final KvCacheConfig kvCacheConfig;
    private final int physicalBlocksPerLogicalBlock;
    private final Supplier<OptionalLong> memlockLimit;
    private final boolean isKvProducer;
    private final boolean isKvConsumer;
    private final int rpcPort;
    // written by setSideChannelHandler, read on the sender-loop thread
    private volatile SideChannelHandler sideChannelHandler;

    private final Object lock = new Object();
    // guarded by lock
    private KvRegistration registration;
    private RegistrationPlan registeredPlan;
    private SenderListener listener;
    private int sideChannelPort;
    private boolean closed;

    /** A worker with the default options; see {@link #builder}. */
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

    /** A builder for a worker with test or embedding hooks. */
    public static Builder builder(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig) {
        return new Builder(config, engine, kvCacheConfig);
    }

    /**
     * Computes what {@link #registerKvCaches} would register, without touching the engine.
     *
     * @param kvCaches layer name to the layer's tensors (one fused tensor, or several such as K and V), in layer order
     * @throws ConnectorException when a region's transfer length exceeds its block stride
     */
    public RegistrationPlan planRegistration(Map<String, List<KvCacheTensor>> kvCaches) {
        Objects.requireNonNull(kvCaches, "kvCaches");
        return RegistrationPlan.of(kvCaches, kvCacheConfig, physicalBlocksPerLogicalBlock, config.protocol(),
                memlockLimit.get());
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
     *         memory over tcp, a transfer length above the stride, or a listener that does not start
     */
    public KvRegistration registerKvCaches(Map<String, List<KvCacheTensor>> kvCaches) {
        LOG.info("Registering KV_Caches. layers: {}", kvCaches.size());
        return registerKvCaches(planRegistration(kvCaches));
    }

    /** Registers a plan made by {@link #planRegistration} of this worker; see {@link #registerKvCaches(Map)}. */
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
            if (isKvConsumer) {
                return reg;
            }
        }
        startListener();
        return reg;
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

    private void startListener() {
        SenderListener l;
        synchronized (lock) {
            if (closed) {
                throw new IllegalStateException("worker is closed");
            }
            try {
                l = new SenderListener(config.hostname(), () -> sideChannelHandler);
            } catch (IOException e) {
                throw new ConnectorException("Mooncake sender listener could not be created: " + e, e);
            }
            listener = l;
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
     * Installs the handler of side-channel messages (the send path). May be called before or after
     * {@link #registerKvCaches}; messages already queued use the handler current when they run.
     */
    public void setSideChannelHandler(SideChannelHandler handler) {
        this.sideChannelHandler = Objects.requireNonNull(handler, "handler");
    }

    /** The handler now installed. */
    public SideChannelHandler sideChannelHandler() {
        return sideChannelHandler;
    }

    /**
     * The producer's sender loop ({@code mooncake-p-sender-0}): the one thread on which handlers run
     * and all producer state is confined. Submit tasks that touch that state here.
     *
     * @throws IllegalStateException before the listener started, after close, or on a consumer
     */
    public Executor senderLoop() {
        synchronized (lock) {
            if (listener == null || closed) {
                throw new IllegalStateException("no sender loop: " + (closed ? "worker is closed"
                        : isKvConsumer ? "kv_consumer workers have none" : "KV caches are not registered yet"));
            }
            return listener.senderLoop();
        }
    }

    /** The ROUTER port decode workers connect to; 0 before registration and on consumers. */
    public int sideChannelPort() {
        synchronized (lock) {
            return sideChannelPort;
        }
    }

    /** Counters of the side-channel listener; all zero when there is none. */
    public ListenerStats listenerStats() {
        synchronized (lock) {
            return listener == null ? new ListenerStats(0, 0, 0, 0, 0, 0) : listener.stats();
        }
    }

    /** The registration, or null before {@link #registerKvCaches} succeeded. */
    public KvRegistration registration() {
        synchronized (lock) {
            return registration;
        }
    }

    /** The plan that was registered, or null before {@link #registerKvCaches} succeeded. */
    public RegistrationPlan registeredPlan() {
        synchronized (lock) {
            return registeredPlan;
        }
    }

    /** The engine's RPC port (vLLM's {@code rpc_port}). */
    public int rpcPort() {
        return rpcPort;
    }

    /** The engine; owned by the caller. */
    public TransferEngine engine() {
        return engine;
    }

    public MooncakeConnectorConfig config() {
        return config;
    }

    public KvCacheConfig kvCacheConfig() {
        return kvCacheConfig;
    }

    /** vLLM's {@code is_kv_producer}. */
    public boolean isKvProducer() {
        return isKvProducer;
    }

    /** vLLM's {@code is_kv_consumer}. */
    public boolean isKvConsumer() {
        return isKvConsumer;
    }

    /**
     * vLLM's {@code shutdown()}: stops the listener and sender-loop threads and closes the ZMQ
     * context. Idempotent; registered memory stays registered (close the engine for that).
     */
    @Override
    public void close() {
        SenderListener l;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            l = listener;
        }
        if (l != null) {
            l.close();
        }
    }

    /** Options of a {@link MooncakeConnectorWorker}. */
    public static final class Builder {
        private final MooncakeConnectorConfig config;
        private final TransferEngine engine;
        private final KvCacheConfig kvCacheConfig;
        private int physicalBlocksPerLogicalBlock = 1;
        private Supplier<OptionalLong> memlockLimit = ResourceLimits::memlockSoftLimit;
        private SideChannelHandler sideChannelHandler = SideChannelHandler.loggingOnly();

        private Builder(MooncakeConnectorConfig config, TransferEngine engine, KvCacheConfig kvCacheConfig) {
            this.config = Objects.requireNonNull(config, "config");
            this.engine = Objects.requireNonNull(engine, "engine");
            this.kvCacheConfig = Objects.requireNonNull(kvCacheConfig, "kvCacheConfig");
        }

        /** vLLM's {@code _physical_blocks_per_logical_kv_block} (kernel blocks per logical block); default 1. */
        public Builder physicalBlocksPerLogicalBlock(int n) {
            if (n <= 0) {
                throw new IllegalArgumentException("physicalBlocksPerLogicalBlock must be positive, got " + n);
            }
            this.physicalBlocksPerLogicalBlock = n;
            return this;
        }

        /** Where the soft RLIMIT_MEMLOCK comes from (tests pin it); default getrlimit(2). */
        public Builder memlockLimit(Supplier<OptionalLong> source) {
            this.memlockLimit = Objects.requireNonNull(source, "source");
            return this;
        }

        /** The side-channel handler; default {@link SideChannelHandler#loggingOnly()}. */
        public Builder sideChannelHandler(SideChannelHandler handler) {
            this.sideChannelHandler = Objects.requireNonNull(handler, "handler");
            return this;
        }

        /** Initialises the engine and returns the worker. */
        public MooncakeConnectorWorker build() {
            return new MooncakeConnectorWorker(this);
        }
    }
}
