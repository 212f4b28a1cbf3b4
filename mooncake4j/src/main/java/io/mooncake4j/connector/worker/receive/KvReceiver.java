package io.mooncake4j.connector.worker.receive;

import io.mooncake4j.connector.PullReqMeta;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.BootstrapQueryResult;
import io.mooncake4j.connector.bootstrap.EngineEntry;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.loop.TransferRecorder;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The decode side's receive path (vLLM's {@code _start_load_kv}, {@code handle_new_engine_id},
 * {@code _connect_to_prefiller_bootstrap}, {@code receive_kv}, {@code process_pulling_result},
 * {@code _handle_failed_recv}; spec §6.13).
 *
 * <p>Threads: D state lives on the receiver loop {@code mooncake-d-receiver-0} (remote agents,
 * bootstrap bookkeeping), except one pull's per-request bookkeeping: a pull's answers are
 * processed where they are read, on {@code mooncake-d-io-0} ({@link PullChannels}), under the
 * lock of that pull's request map, so that a {@code FINISH} is visible to the embedder's
 * {@code getFinished} as soon as it is read, without a hand-off to the loop (a hand-off cost a thread wake-up per answer). Bootstrap
 * {@code /query} calls (blocking HTTP) run on {@code mooncake-d-bootstrap-0} and post their
 * results back to the loop. The finished and failure queues are thread-safe and drained by the
 * embedder's thread; a request's failure is queued before it is queued as finished.
 */
public final class KvReceiver implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(KvReceiver.class);

    private final MooncakeConnectorWorkerView self;
    private final TransferTopology topology;
    private final boolean hmaRequired;
    private final TransferRecorder stats;
    private final BackgroundErrors errors;
    private final ScheduledThreadPoolExecutor loop;
    private final ExecutorService bootstrapPool;
    private final BootstrapClient bootstrap;
    private final PullChannels channels;

    // receiver-loop state
    private final Map<String, Map<Integer, Map<Integer, String>>> remoteAgents = new HashMap<>();
    private final Map<String, Integer> tpSizes = new HashMap<>();
    /** The KV layout each remote engine's workers registered (absent: none, a vLLM P). */
    private final Map<String, String> remoteLayouts = new HashMap<>();
    /** The bootstrap URL each entry of {@code remoteAgents} was resolved from. */
    private final Map<String, String> resolvedFrom = new HashMap<>();
    private long reResolutions; // loop thread; read through reResolutions()
    private final Map<String, List<Runnable>> pendingBootstrapQueries = new HashMap<>();

    // written by the receiver loop and the I/O thread, drained by the embedder's thread
    private final ConcurrentLinkedQueue<String> finishedRecvingReqs = new ConcurrentLinkedQueue<>();
    /** Run after each request is queued as finished (the worker's finished listener); never throws. */
    private volatile Runnable onFinished = () -> { };
    public final ConcurrentLinkedQueue<Set<Integer>> invalidBlockIds = new ConcurrentLinkedQueue<>();
    public final ConcurrentLinkedQueue<String> failedRecvReqs = new ConcurrentLinkedQueue<>();

    /**
     * What the receiver needs to know about its own worker to fill {@code MooncakeXferMetadata}; {@code kvLayout}
     * (what its KV blocks mean, or null) is sent to P and compared with the layout P registered.
     */
    public record MooncakeConnectorWorkerView(String hostname, int rpcPort, int tpRank, int tpSize, int ppRank, int ppSize,
            Registration registration, String kvLayout) {

        /** A view without a KV layout. */
        public MooncakeConnectorWorkerView(String hostname, int rpcPort, int tpRank, int tpSize, int ppRank,
                int ppSize, Registration registration) {
            this(hostname, rpcPort, tpRank, tpSize, ppRank, ppSize, registration, null);
        }
    }

    /**
     * What D announces of its KV-cache registration in each pull (the worker's {@code KvRegistration}
     * without its storages), region by region: base address, block length, KV block length, layer name,
     * layer index and KV-cache group. Immutable.
     */
    public record Registration(List<Long> kvCachesBaseAddr, List<Long> blockLenPerLayer,
            List<Long> kvBlockLenPerLayer, List<String> registeredLayerNames, List<Integer> registeredLayerIndices,
            List<Integer> registeredGroupIndices) {

        /** Keeps unmodifiable copies of the lists. */
        public Registration {
            kvCachesBaseAddr = List.copyOf(kvCachesBaseAddr);
            blockLenPerLayer = List.copyOf(blockLenPerLayer);
            kvBlockLenPerLayer = List.copyOf(kvBlockLenPerLayer);
            registeredLayerNames = List.copyOf(registeredLayerNames);
            registeredLayerIndices = List.copyOf(registeredLayerIndices);
            registeredGroupIndices = List.copyOf(registeredGroupIndices);
        }
    }

    public KvReceiver(MooncakeConnectorWorkerView self, TransferTopology topology, boolean hmaRequired,
            TransferRecorder stats, BackgroundErrors errors, long receiveTimeoutNanos,
            long handshakeTimeoutNanos, BootstrapClient bootstrap, ChannelLimits limits, HealthMonitor health)
            throws java.io.IOException {
        this.self = self;
        this.topology = topology;
        this.hmaRequired = hmaRequired;
        this.stats = stats;
        this.errors = errors;
        this.bootstrap = bootstrap;
        this.loop = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "mooncake-d-receiver-0");
            t.setDaemon(true);
            return t;
        });
        loop.setRemoveOnCancelPolicy(true);
        loop.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        this.bootstrapPool = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mooncake-d-bootstrap-0");
            t.setDaemon(true);
            return t;
        });
        this.channels = new PullChannels(receiveTimeoutNanos, handshakeTimeoutNanos, errors, limits, health,
                addr -> post("receiver loop", () -> forgetAddress(addr)), 0);
    }

    public ScheduledThreadPoolExecutor loop() {
        return loop;
    }

    public PullChannels channels() {
        return channels;
    }

    /** Runs {@code task} on the loop, reporting what it throws. */
    public void post(String where, Runnable task) {
        try {
            loop.execute(errors.guarded(where, task));
        } catch (RejectedExecutionException e) {
            LOG.debug("receiver loop stopped; dropping {}", where);
        }
    }

    /** vLLM's {@code _start_load_kv} (loop thread). */
    public void startLoadKv(Map<String, Map<String, PullReqMeta>> reqsToRecv) {
        WaveTrace.mark(WaveTrace.Point.D_LOAD_START);
        for (Map.Entry<String, Map<String, PullReqMeta>> e : reqsToRecv.entrySet()) {
            String engineId = e.getKey();
            Map<String, PullReqMeta> pullMetas = new LinkedHashMap<>(e.getValue());
            if (pullMetas.isEmpty()) {
                continue;
            }
            String addr = pullMetas.values().iterator().next().remoteBootstrapAddr();
            String from = resolvedFrom.get(engineId);
            if (from != null && !from.equals(addr)) {
                LOG.info("remote engine_id {} is now named with bootstrap server {} (was {}); resolving it again",
                        engineId, addr, from);
                forgetEngine(engineId);
            }
            if (!remoteAgents.containsKey(engineId)) {
                handleNewEngineId(engineId, pullMetas);
            } else {
                receiveKv(engineId, pullMetas);
            }
        }
    }

    private void handleNewEngineId(String engineId, Map<String, PullReqMeta> pullMetas) {
        String addr = pullMetas.values().iterator().next().remoteBootstrapAddr();
        Runnable then = () -> {
            if (!remoteAgents.containsKey(engineId)) {
                handleFailedRecv(pullMetas, new ArrayList<>(pullMetas.keySet()),
                        "remote engine_id " + engineId + " not found from bootstrap server " + addr);
                return;
            }
            receiveKv(engineId, pullMetas);
        };
        List<Runnable> waiting = pendingBootstrapQueries.get(addr);
        if (waiting != null) {
            waiting.add(then); // de-duplicates concurrent queries to one server
            return;
        }
        waiting = new ArrayList<>();
        waiting.add(then);
        pendingBootstrapQueries.put(addr, waiting);
        try {
            bootstrapPool.execute(() -> {
                BootstrapQueryResult result = null;
                RuntimeException failure = null;
                try {
                    result = bootstrap.query(addr);
                } catch (RuntimeException ex) {
                    failure = ex;
                }
                BootstrapQueryResult r = result;
                RuntimeException f = failure;
                post("receiver loop", () -> onBootstrapAnswer(addr, r, f));
            });
        } catch (RejectedExecutionException ex) {
            onBootstrapAnswer(addr, null, ex);
        }
    }

    private void onBootstrapAnswer(String addr, BootstrapQueryResult result, RuntimeException failure) {
        if (result != null) {
            for (EngineEntry entry : result.engines().values()) {
                Map<Integer, Map<Integer, String>> copy = new HashMap<>();
                entry.workerAddr().forEach((tp, pps) -> copy.put(tp, new HashMap<>(pps)));
                remoteAgents.put(entry.engineId(), copy);
                tpSizes.put(entry.engineId(), entry.workerAddr().size());
                resolvedFrom.put(entry.engineId(), addr);
                if (entry.kvLayout() != null) {
                    remoteLayouts.put(entry.engineId(), entry.kvLayout());
                } else {
                    remoteLayouts.remove(entry.engineId());
                }
            }
        } else {
            LOG.error("Failed to connect to bootstrap server {}: {}", addr, failure == null ? "?" : failure.toString());
        }
        List<Runnable> waiting = pendingBootstrapQueries.remove(addr);
        if (waiting != null) {
            for (Runnable r : waiting) {
                errors.guarded("receiver loop", r).run();
            }
        }
    }

    /** vLLM's {@code receive_kv}: one pull per paired P worker (TP × PP fan-out); §15 #5 fixed. */
    private void receiveKv(String engineId, Map<String, PullReqMeta> pullMetas) {
        List<String> reqIds = new ArrayList<>(pullMetas.keySet());
        String theirs = remoteLayouts.get(engineId);
        if (theirs != null && self.kvLayout() != null && !theirs.equals(self.kvLayout())) {
            // before any pull is sent: not a byte of P's KV lands in this node's blocks
            handleFailedRecv(pullMetas, reqIds, String.format(Locale.ROOT, "KV layout mismatch: remote engine_id %s "
                    + "registered KV layout %s, this decode node's is %s; pair nodes that serve the same checkpoint",
                    engineId, theirs, self.kvLayout()));
            return;
        }
        int[] remoteTpRanks;
        try {
            remoteTpRanks = topology.handshakeTargetRanks(tpSizes.get(engineId));
        } catch (TransferPlanningException e) {
            handleFailedRecv(pullMetas, reqIds, e.getMessage());
            return;
        }
        Map<Integer, Map<Integer, String>> agents = remoteAgents.get(engineId);
        List<String> workerAddrs = new ArrayList<>();
        for (int tp : remoteTpRanks) {
            Map<Integer, String> ppToAddr = agents.get(tp);
            if (ppToAddr == null || ppToAddr.isEmpty()) {
                // forget the engine so that the next request queries the bootstrap server again
                forgetEngine(engineId);
                handleFailedRecv(pullMetas, reqIds, String.format(Locale.ROOT,
                        "P tp_rank %d of remote engine_id %s is not registered with its bootstrap server", tp,
                        engineId));
                return;
            }
            if (self.ppSize() == ppToAddr.size() && ppToAddr.containsKey(self.ppRank())) {
                workerAddrs.add(ppToAddr.get(self.ppRank()));
            } else {
                workerAddrs.addAll(new TreeMap<>(ppToAddr).values());
            }
        }
        int count = workerAddrs.size();
        for (PullReqMeta pm : pullMetas.values()) {
            pm.setPullTasksCount(count);
            pm.setPullTasksTotal(count);
        }
        byte[] payload = MooncakeXferMetadataCodec.encode(metadataFor(pullMetas));
        WaveTrace.mark(WaveTrace.Point.D_PULL_SUBMITTED);
        for (String addr : workerAddrs) {
            // called on the I/O thread (or on this one when the channels are closed): the request
            // bookkeeping is done right there, under the lock of pullMetas (see the class comment)
            channels.submit(addr, payload, new PullChannels.Listener() {
                @Override
                public void onResponse(MooncakeXferResponse response) {
                    errors.guarded("pull answer", () -> onPullResponse(pullMetas, reqIds, response)).run();
                }

                @Override
                public void onFailure(String reason) {
                    errors.guarded("pull failure",
                            () -> handleFailedRecv(pullMetas, reqIds, "transfer failed: " + reason)).run();
                }
            });
        }
    }

    private MooncakeXferMetadata metadataFor(Map<String, PullReqMeta> pullMetas) {
        Map<String, MooncakeXferMetadata.ReqBlocks> reqBlocks = new LinkedHashMap<>();
        for (Map.Entry<String, PullReqMeta> e : pullMetas.entrySet()) {
            int[][] ids = e.getValue().localBlockIds();
            long[][] longs = new long[ids.length][];
            for (int g = 0; g < ids.length; g++) {
                longs[g] = new long[ids[g].length];
                for (int i = 0; i < ids[g].length; i++) {
                    longs[g][i] = ids[g][i];
                }
            }
            reqBlocks.put(e.getKey(), new MooncakeXferMetadata.ReqBlocks(e.getValue().transferId(), longs));
        }
        Registration reg = self.registration();
        return new MooncakeXferMetadata(self.hostname(), self.rpcPort(), self.tpSize(), self.tpRank(), reqBlocks,
                longs(reg.kvCachesBaseAddr()), longs(reg.blockLenPerLayer()), longs(reg.kvBlockLenPerLayer()),
                reg.registeredLayerNames(), ints(reg.registeredLayerIndices()), ints(reg.registeredGroupIndices()),
                self.ppSize(), self.kvLayout());
    }

    public static long[] longs(List<Long> l) {
        long[] out = new long[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = l.get(i);
        }
        return out;
    }

    public static int[] ints(List<Integer> l) {
        int[] out = new int[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = l.get(i);
        }
        return out;
    }

    private void onPullResponse(Map<String, PullReqMeta> pullMetas, List<String> reqIds, MooncakeXferResponse resp) {
        if (resp.status() == MooncakeXferResponseStatus.ERROR) {
            handleFailedRecv(pullMetas, reqIds, resp.errMsg() != null ? resp.errMsg() : "transfer error");
            return;
        }
        processPullingResult(resp, pullMetas);
    }

    /** vLLM's {@code process_pulling_result}; an id D did not ask for is ignored. Any thread: locks {@code pullMetas}. */
    private void processPullingResult(MooncakeXferResponse resp, Map<String, PullReqMeta> pullMetas) {
        synchronized (pullMetas) {
            processPullingResultLocked(resp, pullMetas);
        }
    }

    private void processPullingResultLocked(MooncakeXferResponse resp, Map<String, PullReqMeta> pullMetas) {
        for (String reqId : resp.okReqsOrEmpty()) {
            PullReqMeta pm = pullMetas.get(reqId);
            if (pm == null) {
                LOG.warn("P reported request {} that this pull did not ask for; ignored", reqId);
                continue;
            }
            if (pm.failed()) {
                continue;
            }
            if (pm.decrementPullTasksCount() == 0) {
                WaveTrace.mark(WaveTrace.Point.D_FINISHED);
                finished(pm.dReqId());
            }
        }
        if (LOG.isDebugEnabled() && !resp.okReqsOrEmpty().isEmpty()) {
            LOG.debug("pulling kv_caches for {} finished", resp.okReqsOrEmpty());
        }
        if (!resp.errReqsOrEmpty().isEmpty()) {
            handleFailedRecv(pullMetas, resp.errReqsOrEmpty(), resp.errMsg() != null ? resp.errMsg() : "unknown error");
        }
    }

    /**
     * vLLM's {@code _handle_failed_recv}: each request reported at most once; release-only pulls not
     * at all. Any thread: locks {@code pullMetas}.
     */
    private void handleFailedRecv(Map<String, PullReqMeta> pullMetas, List<String> reqIds, String reason) {
        synchronized (pullMetas) {
            handleFailedRecvLocked(pullMetas, reqIds, reason);
        }
    }

    private void handleFailedRecvLocked(Map<String, PullReqMeta> pullMetas, List<String> reqIds, String reason) {
        List<String> failed = new ArrayList<>();
        for (String reqId : reqIds) {
            PullReqMeta pm = pullMetas.get(reqId);
            if (pm == null || pm.failed()) {
                continue;
            }
            if (pm.pullTasksTotal() > 0 && pm.pullTasksCount() <= 0) {
                // every pull of it already succeeded and its finish was reported: a later failure of
                // the same connection (P died before answering the pull's other requests) is not its
                // failure; reporting it again would finish it twice and mark blocks it no longer owns
                continue;
            }
            pm.setFailed(true);
            failed.add(reqId);
            stats.recordFailedRecv();
            Set<Integer> invalid = new LinkedHashSet<>();
            for (int[] group : pm.localBlockIds()) {
                for (int b : group) {
                    invalid.add(b);
                }
            }
            if (invalid.isEmpty()) {
                continue; // release-only pull: the scheduler does not know this request
            }
            if (hmaRequired) {
                failedRecvReqs.add(pm.dReqId());
            } else {
                invalidBlockIds.add(invalid);
            }
            finished(pm.dReqId());
        }
        if (!failed.isEmpty()) {
            LOG.error("pulling kv_caches for {} failed: {}", failed, reason);
        }
    }

    private void forgetEngine(String engineId) {
        remoteAgents.remove(engineId);
        tpSizes.remove(engineId);
        resolvedFrom.remove(engineId);
        remoteLayouts.remove(engineId);
        reResolutions++;
    }

    /**
     * A P worker's side-channel connection was lost (loop thread): every engine with a worker at that
     * address is forgotten, so that its next pull asks the bootstrap server again (a P restarted under
     * the same engine id has a new address). vLLM keeps the dead address for good.
     */
    private void forgetAddress(String address) {
        List<String> drop = new ArrayList<>();
        remoteAgents.forEach((engine, tps) -> {
            for (Map<Integer, String> pps : tps.values()) {
                if (pps.containsValue(address)) {
                    drop.add(engine);
                    return;
                }
            }
        });
        for (String engine : drop) {
            LOG.info("side-channel connection to {} of remote engine_id {} was lost; it is resolved again on its "
                    + "next pull", address, engine);
            forgetEngine(engine);
        }
    }

    /** Cached engine entries dropped so far (lost connection, new bootstrap URL, missing rank); loop thread. */
    public long reResolutions() {
        return reResolutions;
    }

    /**
     * Sets what runs (on the thread that queued it: the I/O thread or the loop) right after a request
     * is queued as finished, its failure queued before; it must not throw (the worker guards it).
     */
    public void onFinished(Runnable r) {
        onFinished = java.util.Objects.requireNonNull(r, "r");
    }

    private void finished(String dReqId) {
        finishedRecvingReqs.add(dReqId);
        onFinished.run();
    }

    /**
     * Whether a finished request is queued for {@link #fetchFinishedRecving}, taking nothing (tests: the
     * finished listener runs only once its event is visible). Waiting for one is the finished listener's job.
     */
    public boolean hasFinished() {
        return !finishedRecvingReqs.isEmpty();
    }

    /**
     * vLLM's {@code fetch_finished_recving_reqs}: what finished since the last call, without waiting
     * for any loop (the embedder's thread). A failed request's failure was queued before it.
     */
    public Set<String> fetchFinishedRecving() {
        String id = finishedRecvingReqs.poll();
        if (id == null) {
            return Set.of();
        }
        Set<String> out = new LinkedHashSet<>();
        do {
            out.add(id);
        } while ((id = finishedRecvingReqs.poll()) != null);
        return out;
    }

    /** Stops the pulls, the loop and the bootstrap thread; idempotent. */
    @Override
    public void close() {
        channels.close();
        bootstrapPool.shutdownNow();
        loop.shutdown();
        try {
            if (!loop.awaitTermination(5, TimeUnit.SECONDS)) {
                loop.shutdownNow();
                LOG.error("mooncake-d-receiver-0 did not stop within 5 s");
            }
            if (!bootstrapPool.awaitTermination(5, TimeUnit.SECONDS)) {
                LOG.error("mooncake-d-bootstrap-0 did not stop within 5 s");
            }
        } catch (InterruptedException e) {
            loop.shutdownNow();
            Thread.currentThread().interrupt();
        }
        bootstrap.close();
    }
}
