package io.mooncake4j.sim;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.scheduler.MooncakeConnectorScheduler;
import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small serving engine that drives the Mooncake connector exactly the way vLLM's scheduler and
 * model runner do (spec §4, §5, §6.12): the reference embedding of mooncake4j.
 *
 * <p>One engine has a {@link MooncakeConnectorScheduler}, a {@link BlockPool} per KV-cache group
 * with prefix caching, and one {@link SimWorker} plus {@link SyntheticModel} per tensor-parallel
 * rank, each rank with its own KV caches ({@link KvCaches#allocate}, fused layout) in host memory or,
 * with a {@link KvPlacement#gpu GPU placement}, in device memory that the synthetic model reaches
 * through copies. A single
 * step-loop thread ({@code mooncake-<role>-engine-0}) repeats:
 * <ol>
 *   <li><b>schedule</b>: running decodes first, then waiting requests in arrival order: prefix-cache
 *       lookup → {@code getNumNewMatchedTokens} → block allocation → {@code updateStateAfterAlloc};
 *       a request whose KV is loaded asynchronously waits in
 *       {@link RequestStatus#WAITING_FOR_REMOTE_KVS} until its id is finished receiving;</li>
 *   <li>{@code buildConnectorMeta}, handed to every TP worker's {@code startLoadKv};</li>
 *   <li><b>forward</b> on every rank (the synthetic model writes the KV of the scheduled tokens);</li>
 *   <li>{@code getTransferResults} and {@code getBlockIdsWithLoadErrors} on every rank, merged as vLLM
 *       does ({@link TpOutputAggregator}: finished when every rank reported it);</li>
 *   <li><b>update</b>: sampled tokens appended; finished requests go through {@code requestFinished} —
 *       a P request (length-capped after its prefill, {@code max_tokens=1}) keeps its blocks
 *       ({@code delay_free}) until it is finished sending; D requests whose load finished are
 *       checked for load errors (a failed load fails the request, vLLM's "fail" policy), their
 *       received KV is verified byte for byte, and they start decoding.</li>
 * </ol>
 * Blocks for decode tokens are reserved at admission (this engine never preempts).
 *
 * <p>The engine keeps the loop, its wake-ups and the engine's resources (KV memory, workers,
 * models); the scheduler side of a step (queues, admission, blocks, aborts, finishing) is a
 * {@code StepScheduler}, the worker side on every rank (forward pass, layer hooks, results, stats)
 * a {@code ModelRunner}. Both are owned by the step-loop thread.
 *
 * <p><b>Threading:</b> {@link #submit} may be called from any thread; everything else happens on
 * the step-loop thread. Results complete on that thread: keep continuations short. An error in
 * the loop is logged, fails every pending request and stops the engine ({@link #failure()}).
 */
public final class SimEngine implements AutoCloseable {

    /**
     * A {@code kv_transfer_params} key of mooncake4j's: the KV layout of the P node that computed the
     * prompt ({@link StepModel#kvLayout}). A P node with a model returns it among the parameters of its
     * answer; a D request that carries it is refused unless it equals this engine's own layout. vLLM
     * ignores keys it does not know.
     */
    public static final String KV_LAYOUT_PARAM = "mooncake4j_kv_layout";

    private static final Logger LOG = LoggerFactory.getLogger(SimEngine.class);
    private static final AtomicInteger ENGINES = new AtomicInteger();
    /** How long the step loop of an engine with no request at all waits for one before it looks again. */
    private static final long IDLE_WAIT_MILLIS = 50;
    /**
     * How long the step loop waits for a wake-up (a request, an abort, a worker's finished listener)
     * while requests are in flight, when every worker has a listener: a guard against a missed
     * signal, never the mechanism. A finished transfer has to reach the step loop as soon as its
     * worker learns of it, not a poll interval later (it adds to time to first token), so the
     * listener's wake-up does the work and this timeout only bounds the stall of a lost wake-up.
     */
    private static final long GUARD_WAIT_MILLIS = 100;
    /** The poll interval while requests are in flight for workers without a finished listener. */
    private static final long POLL_WAIT_MILLIS = 1;

    /**
     * Scheduler limits.
     *
     * @param maxNumSeqs          requests admitted at once (running, loading or prefilling)
     * @param maxNumBatchedTokens prompt tokens computed per step (at least one request per step)
     */
    public record Limits(int maxNumSeqs, int maxNumBatchedTokens) {
        public Limits {
            if (maxNumSeqs <= 0 || maxNumBatchedTokens <= 0) {
                throw new IllegalArgumentException("limits must be positive: " + maxNumSeqs + ", " + maxNumBatchedTokens);
            }
        }

        /** 64 sequences, 8192 batched tokens. */
        public static Limits defaults() {
            return new Limits(64, 8192);
        }
    }

    /**
     * Where the engine's KV caches live: host memory, or device {@code device} of {@code deviceMemory}
     * (every rank on that device; the storages are {@code cuda:<device>} allocations freed when the
     * engine closes).
     *
     * @param deviceMemory null for host memory
     * @param device       the GPU index, -1 for host memory
     */
    public record KvPlacement(DeviceMemory deviceMemory, int device, boolean shareable) {

        public KvPlacement {
            if ((deviceMemory == null) != (device < 0)) {
                throw new IllegalArgumentException("a GPU placement needs a DeviceMemory and a device >= 0, host "
                        + "memory neither; got " + deviceMemory + ", " + device);
            }
            if (shareable && deviceMemory != null) {
                throw new IllegalArgumentException("only host memory is shareable (memfd); GPU memory is not");
            }
        }

        /** Host memory, private unless {@link HostMemoryAllocator#shareableByDefault()} says otherwise. */
        public static KvPlacement host() {
            return new KvPlacement(null, -1, false);
        }

        /**
         * Shareable host memory ({@link HostMemoryAllocator#allocateShareable}: memfd, {@code MAP_SHARED}),
         * so a peer engine on this machine can map it and the {@code shm} transport can move it.
         */
        public static KvPlacement sharedHost() {
            return new KvPlacement(null, -1, true);
        }

        /** Memory of GPU {@code device}, allocated and reached through {@code deviceMemory}. */
        public static KvPlacement gpu(DeviceMemory deviceMemory, int device) {
            return new KvPlacement(Objects.requireNonNull(deviceMemory, "deviceMemory"), device, false);
        }

        /** Whether this is GPU memory. */
        public boolean onGpu() {
            return deviceMemory != null;
        }

        /** {@code cpu} or {@code cuda:N}. */
        @Override
        public String toString() {
            return onGpu() ? "cuda:" + device : "cpu";
        }
    }

    /**
     * How the synthetic model picks its tokens, and what a decode engine does with received KV that
     * does not verify.
     */
    public enum Sampling {
        /**
         * Each token is a function of the prefix hash of the tokens before it
         * ({@link SyntheticModel#sample(long)}); a D request whose received KV does not verify fails
         * ({@code bin/mooncake4j demo}).
         */
        PROMPT,
        /**
         * Each token is a function of the prefix hash and of the {@linkplain SyntheticModel#kvDigest KV
         * digest} of the prompt as read from this engine's cache once the prompt's KV is complete
         * (after the local prefill, or on D after the load and before anything recomputes a position):
         * a {@code kv_both} engine and a P→D pair give the same tokens, and a changed byte of KV
         * changes them. A D request whose received KV does not verify is logged and counted
         * ({@link SimResult#mismatchedWords()}) but completes, as a real model would compute on
         * whatever KV it holds ({@code bin/mooncake4j serve}).
         */
        KV
    }

    /** Creates the worker of one TP rank over that rank's KV caches (and registers them). */
    @FunctionalInterface
    public interface WorkerFactory {
        /**
         * @param rankConfig the engine's connector configuration with this rank's {@code tp_rank}
         * @param caches     this rank's KV caches, to register
         */
        SimWorker create(MooncakeConnectorConfig rankConfig, KvCaches caches);

        /**
         * As {@link #create(MooncakeConnectorConfig, KvCaches)}, told the model shape (what the engine
         * calls): a factory that builds a connector worker passes the model's KV-head count and MLA flag
         * to it, as vLLM's worker learns them from the model config (heterogeneous-TP math, spec §6.10).
         * The default ignores {@code model}.
         */
        default SimWorker create(MooncakeConnectorConfig rankConfig, KvCaches caches, ModelPreset model) {
            return create(rankConfig, caches);
        }
    }

    /**
     * What the engine is doing, refreshed after every step.
     *
     * @param waiting         requests not yet admitted
     * @param running         requests prefilling or decoding
     * @param loadingRemoteKv requests in {@code WAITING_FOR_REMOTE_KVS}
     * @param delayedFree     finished P requests whose blocks wait for {@code finished_sending}
     * @param freeBlocks      free blocks of group 0 (cached-but-unused blocks included)
     * @param finished        requests finished so far
     * @param failed          of those, failed
     * @param steps           steps run
     */
    public record Snapshot(int waiting, int running, int loadingRemoteKv, int delayedFree, int freeBlocks,
                           long finished, long failed, long steps) {}

    private final MooncakeConnectorConfig config;
    private final ModelPreset preset;
    private final int numBlocks;
    private final int blockSize;
    private final String role;
    private final HostMemoryAllocator allocator = new HostMemoryAllocator();
    private final KvPlacement placement;
    private final List<DeviceMemory.Allocation> deviceAllocations = new ArrayList<>();
    private final List<SimWorker> workers = new ArrayList<>();
    private final List<SyntheticModel> models = new ArrayList<>();
    /** A real model computing the tokens instead of the synthetic one (TP 1), or null. */
    private final StepModel stepModel;
    /** The shared KV pool beside the prefix cache (real model, TP 1), or null. */
    private final KvPool kvPool;
    private final MooncakeConnectorScheduler scheduler;
    private final BlockPool[] pools;
    /** The worker side of each step on every rank: forward passes, layer hooks, results, stats. */
    private final ModelRunner runner;
    /** The scheduler side of each step: request queues, admission, blocks, aborts, finishing. */
    private final StepScheduler stepScheduler;
    private final long bytesPerBlockAllRanks;
    private final LinkedBlockingQueue<SimRequest> incoming = new LinkedBlockingQueue<>();
    private final java.util.concurrent.ConcurrentLinkedQueue<String[]> aborts =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final Set<String> knownIds = ConcurrentHashMap.newKeySet();
    private final Sampling sampling;
    private final Thread loop;
    private volatile boolean stopping;
    /**
     * Set by the workers' finished listeners, {@link #submit}, {@link #abort} and {@link #close};
     * cleared by the step loop before each step, which then waits only while it is clear.
     */
    private final java.util.concurrent.atomic.AtomicBoolean wakeup = new java.util.concurrent.atomic.AtomicBoolean();
    /** Every worker calls {@link #wake} when it has results ({@link SimWorker#onFinished}); else the loop polls. */
    private final boolean workersNotify;
    /** Calls of {@link #step()} so far (tests: an engine waiting for remote KV does not spin). */
    private final java.util.concurrent.atomic.LongAdder stepCalls = new java.util.concurrent.atomic.LongAdder();
    private volatile Throwable failure;
    private volatile Snapshot snapshot = new Snapshot(0, 0, 0, 0, 0, 0, 0, 0);

    private SimEngine(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory, KvPlacement placement, Sampling sampling, StepModel stepModel,
            KvPool.Factory poolFactory) {
        this.config = Objects.requireNonNull(config, "config");
        this.stepModel = stepModel;
        if (stepModel != null && (config.tpSize() != 1 || placement.onGpu())) {
            throw new IllegalArgumentException("a real model runs at TP 1 on host memory, got tp " + config.tpSize()
                    + " on " + placement);
        }
        this.sampling = Objects.requireNonNull(sampling, "sampling");
        this.placement = Objects.requireNonNull(placement, "placement");
        this.preset = Objects.requireNonNull(preset, "preset");
        Objects.requireNonNull(limits, "limits");
        Objects.requireNonNull(factory, "factory");
        if (numBlocks <= 0) {
            throw new IllegalArgumentException("numBlocks must be positive, got " + numBlocks);
        }
        this.numBlocks = numBlocks;
        this.blockSize = preset.blockSize();
        this.role = switch (config.kvRole()) {
            case KV_PRODUCER -> "p";
            case KV_CONSUMER -> "d";
            case KV_BOTH -> "both";
        };
        int tp = config.tpSize();
        KvCaches first = null;
        long perBlock = 0;
        try {
            for (int r = 0; r < tp; r++) {
                KvCaches caches = KvCaches.allocate(preset, tp, numBlocks, KvCacheLayout.FUSED,
                        placement.onGpu() ? this::allocateOnDevice
                                : placement.shareable() ? allocator::allocateShareable : allocator::allocate);
                if (first == null) {
                    first = caches;
                }
                SyntheticModel model = new SyntheticModel(preset, tp, r, caches, placement.deviceMemory());
                models.add(model);
                perBlock += model.bytesPerBlock();
                if (stepModel != null) {
                    stepModel.bind(caches);
                }
                workers.add(factory.create(config.toBuilder().tp(r, tp).build(), caches, preset));
            }
        } catch (RuntimeException | Error e) {
            closeWorkers();
            freeMemory();
            throw e;
        }
        this.bytesPerBlockAllRanks = perBlock;
        KvPool pool = null;
        if (poolFactory != null) {
            try {
                pool = poolFactory.create(first, blockSize);
            } catch (RuntimeException | Error e) {
                closeWorkers();
                freeMemory();
                throw e;
            }
        }
        this.kvPool = pool;
        this.scheduler = new MooncakeConnectorScheduler(config, first.config(), blockSize);
        this.pools = new BlockPool[first.config().groups().size()];
        Arrays.setAll(pools, g -> new BlockPool(numBlocks));
        this.runner = new ModelRunner(List.copyOf(workers), List.copyOf(models), stepModel, sampling);
        this.stepScheduler = new StepScheduler(config.engineId(), scheduler, pools, blockSize, limits, sampling,
                stepModel, List.copyOf(models), knownIds, perBlock, pool, this::wake);
        this.loop = new Thread(this::runLoop, "mooncake-" + role + "-engine-" + (ENGINES.getAndIncrement()));
        this.loop.setDaemon(true);
        boolean notify = true;
        for (SimWorker w : workers) {
            notify &= w.onFinished(this::wake); // every worker registers: no short-circuit
        }
        this.workersNotify = notify;
    }

    private DeviceMemory.Allocation allocateOnDevice(long bytes) {
        DeviceMemory.Allocation a = placement.deviceMemory().allocate(placement.device(), bytes);
        deviceAllocations.add(a);
        return a;
    }

    /**
     * Allocates the KV caches of every TP rank ({@code config.tpSize()} ranks, {@code numBlocks}
     * blocks each) in host memory, creates their workers in rank order and starts the step loop.
     *
     * @param config  this engine's connector configuration (role, engine id, TP size; the rank is set per worker)
     * @param preset  the model shape
     * @param factory creates each rank's worker
     */
    public static SimEngine start(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory) {
        return start(config, preset, numBlocks, limits, factory, KvPlacement.host());
    }

    /**
     * As {@link #start(MooncakeConnectorConfig, ModelPreset, int, Limits, WorkerFactory)}, with the KV
     * caches at {@code placement} (GPU memory: the workers' transfer engines must reach it, and the
     * synthetic model writes and reads it through copies).
     */
    public static SimEngine start(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory, KvPlacement placement) {
        return start(config, preset, numBlocks, limits, factory, placement, Sampling.PROMPT);
    }

    /**
     * As {@link #start(MooncakeConnectorConfig, ModelPreset, int, Limits, WorkerFactory, KvPlacement)},
     * with the model picking its tokens by {@code sampling}.
     */
    public static SimEngine start(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory, KvPlacement placement, Sampling sampling) {
        return start(config, preset, numBlocks, limits, factory, placement, sampling, null);
    }

    /**
     * An engine whose tokens {@code model} computes (TP 1, host memory, the fused layout of
     * {@link StepModel#kvShape}); the engine closes {@code model} when it closes.
     *
     * @param blockSize tokens per block
     */
    public static SimEngine start(MooncakeConnectorConfig config, StepModel model, int blockSize, int numBlocks,
            Limits limits, WorkerFactory factory, KvPlacement placement) {
        Objects.requireNonNull(model, "model");
        return start(config, model.kvShape(blockSize), numBlocks, limits, factory, placement, Sampling.PROMPT, model,
                null);
    }

    /**
     * As {@link #start(MooncakeConnectorConfig, StepModel, int, int, Limits, WorkerFactory, KvPlacement)},
     * with a shared KV pool ({@link StoreKvPool}: vLLM's {@code MooncakeStoreConnector}) beside the
     * prefix cache; the engine closes the pool (draining its saves) before it frees the KV memory.
     */
    public static SimEngine start(MooncakeConnectorConfig config, StepModel model, int blockSize, int numBlocks,
            Limits limits, WorkerFactory factory, KvPlacement placement, KvPool.Factory pool) {
        Objects.requireNonNull(model, "model");
        return start(config, model.kvShape(blockSize), numBlocks, limits, factory, placement, Sampling.PROMPT, model,
                Objects.requireNonNull(pool, "pool"));
    }

    private static SimEngine start(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory, KvPlacement placement, Sampling sampling, StepModel stepModel) {
        return start(config, preset, numBlocks, limits, factory, placement, sampling, stepModel, null);
    }

    private static SimEngine start(MooncakeConnectorConfig config, ModelPreset preset, int numBlocks, Limits limits,
            WorkerFactory factory, KvPlacement placement, Sampling sampling, StepModel stepModel,
            KvPool.Factory pool) {
        SimEngine e = new SimEngine(config, preset, numBlocks, limits, factory, placement, sampling, stepModel, pool);
        e.loop.start();
        LOG.info("engine {} ({}) up: model {}, tp {}, {} blocks per rank ({} tokens), {} of KV in {}",
                config.engineId(), config.kvRole().wireName(), preset.name(), config.tpSize(), numBlocks,
                (long) numBlocks * e.blockSize, io.mooncake4j.internal.sys.Bytes.human(e.kvBytes()), placement);
        return e;
    }

    /**
     * The per-layer compute model of the prefill: besides writing each layer's KV, every layer of a
     * forward pass costs {@code perLayerPer1kTokens} for each 1024 prompt tokens it computes (scaled
     * linearly). The cost is spent parked, not spinning, as a GPU's compute leaves the host's cores
     * free, and is counted on a simulated device clock: layer after layer, fill and compute back to
     * back, so a late wake-up of the step thread for one layer does not stretch the layers after it
     * (as a GPU runs the kernels its host enqueued ahead). With {@code layerwise_push} on, the engine calls {@code saveKvLayer} after each layer and
     * {@code waitForSave} after the last, so P's transfer overlaps the rest of the prefill. Any thread;
     * applies from the next step.
     */
    public void layerCompute(Duration perLayerPer1kTokens) {
        if (perLayerPer1kTokens.isNegative()) {
            throw new IllegalArgumentException("layer compute must be >= 0, got " + perLayerPer1kTokens);
        }
        runner.layerComputeNanosPer1k(perLayerPer1kTokens.toNanos());
    }

    /**
     * Diagnostics (benchmarks): the step thread's cumulative time in forward passes with work, ns:
     * {@code {wall, KV fill, waits for the simulated device, connector layer hooks, hook calls}}.
     * Any thread; each value is current as of the last forward pass that ended.
     */
    long[] forwardTimes() {
        return runner.forwardTimes();
    }

    /**
     * Diagnostics (benchmarks): {@code listener} is told the id of each request whose remote KV load
     * ends (D), on the step thread, right when its KV-ready time is taken and before the received KV
     * is verified; null removes it. Keep it short.
     */
    void onKvLoaded(java.util.function.Consumer<String> listener) {
        stepScheduler.onKvLoaded(listener);
    }

    /**
     * Whether prefill pushes KV layer by layer ({@code layerwise_push} on, host caches, full attention,
     * and a real model only when it can be driven layer by layer).
     */
    public boolean layerwise() {
        return scheduler.layerwisePush() && !placement.onGpu() && (stepModel == null || stepModel.layerwise());
    }

    /** How the model picks its tokens. */
    public Sampling sampling() {
        return sampling;
    }

    /** The workers, in TP-rank order (their own methods say from which thread they may be used). */
    public List<SimWorker> workers() {
        return List.copyOf(workers);
    }

    /** Where the KV caches live. */
    public KvPlacement placement() {
        return placement;
    }

    /** This engine's id. */
    public String engineId() {
        return config.engineId();
    }

    /** The connector configuration the engine was started with. */
    public MooncakeConnectorConfig config() {
        return config;
    }

    /** The model shape. */
    public ModelPreset preset() {
        return preset;
    }

    /** Blocks per rank. */
    public int numBlocks() {
        return numBlocks;
    }

    /** Bytes of KV caches over all ranks (host or GPU memory, see {@link #placement()}). */
    public long kvBytes() {
        return bytesPerBlockAllRanks * numBlocks;
    }

    /** KV bytes of one block over all ranks and layers. */
    public long bytesPerBlockAllRanks() {
        return bytesPerBlockAllRanks;
    }

    /** The latest step's view. */
    public Snapshot snapshot() {
        return snapshot;
    }

    /** The error that stopped the step loop, or {@code null}. */
    public Throwable failure() {
        return failure;
    }

    /** A copy of the connector stats gathered from every rank so far. */
    public MooncakeKvConnectorStats kvConnectorStats() {
        return runner.kvConnectorStats();
    }

    /**
     * Also hands each rank's statistics of each step (a drained snapshot) to {@code listener}, on the
     * step thread: for meters ({@code MooncakeConnectorMetrics::record}). Replaces the previous one.
     */
    public void onKvConnectorStats(Consumer<MooncakeKvConnectorStats> listener) {
        runner.onKvConnectorStats(listener);
    }

    /**
     * Accepts a request (any thread). The future completes when it finished; it completes
     * exceptionally only when the engine stops first or the request can never fit.
     *
     * @param kvTransferParams the request's {@code kv_transfer_params} (copied), or {@code null}
     */
    public CompletableFuture<SimResult> submit(String requestId, int[] promptTokens, int maxTokens,
            Map<String, Object> kvTransferParams) {
        return submit(requestId, promptTokens, maxTokens, kvTransferParams, null);
    }

    /**
     * As {@link #submit(String, int[], int, Map)}, with {@code onToken} called with each generated
     * token as it is sampled (on the step-loop thread: keep it short, never block).
     *
     * @param onToken may be null
     */
    public CompletableFuture<SimResult> submit(String requestId, int[] promptTokens, int maxTokens,
            Map<String, Object> kvTransferParams, IntConsumer onToken) {
        Objects.requireNonNull(requestId, "requestId");
        if (promptTokens.length == 0 || maxTokens <= 0) {
            throw new IllegalArgumentException("need a non-empty prompt and max_tokens >= 1");
        }
        int need = StepScheduler.ceilDiv(promptTokens.length + maxTokens - 1, blockSize);
        if (need > numBlocks) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "request %s needs %d blocks (%d prompt + %d output tokens) but engine %s has %d",
                    requestId, need, promptTokens.length, maxTokens, engineId(), numBlocks));
        }
        checkKvLayout(requestId, kvTransferParams);
        if (!knownIds.add(requestId)) {
            throw new IllegalArgumentException("duplicate request id " + requestId);
        }
        SimRequest r = new SimRequest(requestId, promptTokens, maxTokens, kvTransferParams, pools.length);
        r.onToken = onToken;
        if (stopping || failure != null) {
            r.future.completeExceptionally(new IllegalStateException("engine " + engineId() + " is stopped"));
            return r.future;
        }
        incoming.add(r);
        wake();
        return r.future;
    }

    /**
     * Refuses a request whose {@code kv_transfer_params} name a P layout other than this engine's
     * model's: decoding on the KV of another model gives garbage, so the request never starts. Nothing
     * to compare (no key, the synthetic model) lets it through.
     */
    private void checkKvLayout(String requestId, Map<String, Object> kvTransferParams) {
        Object theirs = kvTransferParams == null ? null : kvTransferParams.get(KV_LAYOUT_PARAM);
        String ours = kvLayout();
        if (theirs == null || ours == null || ours.equals(theirs)) {
            return;
        }
        throw new IllegalArgumentException(KvLayouts.mismatchMessage(requestId, String.valueOf(theirs), ours));
    }

    /**
     * What this engine's KV blocks mean: the model's layout ({@link StepModel#kvLayout}) and the block size
     * ({@link KvLayouts#withBlockSize}); null for the synthetic model.
     */
    public String kvLayout() {
        return stepModel == null ? null : KvLayouts.withBlockSize(stepModel.kvLayout(), blockSize);
    }

    /**
     * Aborts a request (any thread), as vLLM's engine does when a client goes away; applied at the next step.
     * A request that has not been admitted, or is prefilling or decoding, finishes at once as
     * {@link RequestStatus#FINISHED_ABORTED}: the connector is told ({@code request_finished}: a P request's
     * transfer goes to {@code reqs_not_processed}, a D request not yet allocated releases P's blocks) and its
     * blocks are freed. A D request whose KV is being loaded is abandoned: it ends, and its blocks are freed, when
     * the load does (succeeded or failed), because a write of P may still land in them until then (see
     * docs/differences-from-vllm.md, "No write after abandonment"). A request that already finished — a P
     * request whose blocks are held until D pulled them, say — is not affected. Its future completes with a
     * result whose {@link SimResult#error()} is {@code reason}. Unknown ids are ignored.
     */
    public void abort(String requestId, String reason) {
        Objects.requireNonNull(requestId, "requestId");
        aborts.add(new String[] {requestId, Objects.requireNonNullElse(reason, "aborted")});
        wake();
    }

    /**
     * Ends a running request normally (any thread), as vLLM's engine does when a stop string or an
     * end-of-sequence token ends it: applied at the next step, the request finishes as
     * {@link RequestStatus#FINISHED_STOPPED} with the tokens it has, no error, counted as a success
     * (not in {@link Snapshot#failed()}), the connector told and the blocks freed as for any finished
     * request. A request that is not prefilling or decoding (waiting, loading its KV, finished) is not
     * affected. Unknown ids are ignored.
     */
    public void stop(String requestId) {
        Objects.requireNonNull(requestId, "requestId");
        aborts.add(new String[] {requestId, null}); // no reason: a normal end, applied with the aborts
        wake();
    }

    // ------------------------------------------------------------------ step loop

    private void runLoop() {
        try {
            while (!stopping) {
                wakeup.set(false); // a wake-up from now on is for what this step does not see
                stepCalls.increment();
                if (!step()) {
                    // nothing changed: wait for a wake-up (a request, an abort, a worker's finished
                    // listener), with a guard timeout; workers without a listener are polled every 1 ms
                    // while the connector has work to report on. With no request at all (none waiting,
                    // running, loading or held) there is nothing to poll the workers for.
                    boolean idle = stepScheduler.idle();
                    awaitWakeup(idle ? IDLE_WAIT_MILLIS : workersNotify ? GUARD_WAIT_MILLIS : POLL_WAIT_MILLIS);
                }
            }
        } catch (InterruptedException e) {
            if (!stopping) {
                failure = e;
                LOG.error("engine {}: step loop interrupted", engineId());
            }
        } catch (Throwable t) {
            failure = t;
            LOG.error("engine {}: step loop failed; failing every pending request", engineId(), t);
        } finally {
            failPending(failure != null ? failure : new IllegalStateException("engine " + engineId() + " closed"));
        }
    }

    /** Sets the wake-up flag and unparks the step loop (any thread; cheap, never blocks). */
    private void wake() {
        if (!wakeup.getAndSet(true)) {
            java.util.concurrent.locks.LockSupport.unpark(loop); // null while constructing: no-op
        }
    }

    /** Parks the step loop until {@link #wake} or {@code millis} passed (step loop). */
    private void awaitWakeup(long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!wakeup.get() && !stopping) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(this, left);
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
        }
    }

    /** {@return the step loop's {@code step()} calls so far (tests)} */
    long stepCalls() {
        return stepCalls.sum();
    }

    private void failPending(Throwable cause) {
        stepScheduler.failPending(incoming, cause);
    }

    /** One engine step; true when a forward pass ran or a request changed state. */
    private boolean step() {
        stepScheduler.drainIncoming(incoming);
        boolean aborted = !aborts.isEmpty() && stepScheduler.applyAborts(aborts);
        // ---- schedule
        List<SimRequest> scheduled = new ArrayList<>();
        boolean admitted = stepScheduler.schedule(scheduled);
        boolean layerwise = layerwise();
        long prefillTokens = stepScheduler.prefillTokens(scheduled, layerwise);
        long layerCost = runner.layerCost(prefillTokens);
        MooncakeConnectorMetadata meta = scheduler.buildConnectorMeta();
        // ---- worker side: start_load_kv, forward, get_finished (per rank, as each rank's model runner does)
        SimWorker.TransferResults merged = runner.run(meta, scheduled, layerwise, layerCost,
                stepScheduler.invalidBlocks());
        boolean changed = stepScheduler.update(scheduled, merged, admitted);
        snapshot = stepScheduler.snapshot();
        return changed || aborted;
    }

    /** Stops the step loop (pending requests fail), closes the workers in reverse rank order, frees the KV caches. */
    @Override
    public void close() {
        if (stopping) {
            return;
        }
        stopping = true;
        wake();
        boolean joined = false;
        try {
            loop.join(Duration.ofSeconds(30));
            joined = !loop.isAlive();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        boolean drained = true;
        if (kvPool != null) {
            try {
                drained = kvPool.closeAndDrain(); // its saves read the KV memory: they end first
            } catch (RuntimeException e) {
                LOG.warn("engine {}: closing the KV pool failed", engineId(), e);
                drained = false;
            }
        }
        closeWorkers();
        if (joined && drained) {
            freeMemory();
        } else {
            LOG.error("engine {}: {}; its KV memory is not freed", engineId(),
                    joined ? "a KV pool save still reads it" : "step loop did not stop within 30 s");
        }
    }

    /** Closes the models (their copy queues and scratch), then frees the KV memory (after the workers closed). */
    private void freeMemory() {
        if (stepModel != null) {
            try {
                stepModel.close();
            } catch (RuntimeException e) {
                LOG.warn("engine {}: closing the model failed", config.engineId(), e);
            }
        }
        for (SyntheticModel m : models) {
            try {
                m.close();
            } catch (RuntimeException e) {
                LOG.warn("engine {}: closing the synthetic model of rank {} failed", config.engineId(), m.tpRank(), e);
            }
        }
        for (DeviceMemory.Allocation a : deviceAllocations) {
            try {
                a.close();
            } catch (RuntimeException e) {
                LOG.warn("engine {}: freeing {} failed", config.engineId(), a, e);
            }
        }
        deviceAllocations.clear();
        allocator.close();
    }

    private void closeWorkers() {
        for (int i = workers.size() - 1; i >= 0; i--) {
            try {
                workers.get(i).close();
            } catch (RuntimeException e) {
                LOG.warn("engine {}: closing worker of rank {} failed", config.engineId(), i, e);
            }
        }
    }

    @Override
    public String toString() {
        return "SimEngine[" + engineId() + ", " + config.kvRole().wireName() + ", tp " + config.tpSize() + "]";
    }

    /** {@return the shared KV pool beside the prefix cache, or null} */
    public KvPool kvPool() {
        return kvPool;
    }

    /** For tests: the pool of group {@code g} (only safe to inspect once the engine is idle or closed). */
    BlockPool pool(int g) {
        return pools[g];
    }

}
