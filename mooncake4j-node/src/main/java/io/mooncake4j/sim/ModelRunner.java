package io.mooncake4j.sim;

import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.PullReqMeta;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.sim.SimEngine.Sampling;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The worker side of a {@link SimEngine}'s step on every tensor-parallel rank, as each rank's vLLM
 * model runner does it: {@code startLoadKv} with the rank's own copy of the connector metadata, the
 * forward pass (the synthetic model's KV fill, whole or layer by layer with {@code saveKvLayer}
 * after each layer and {@code waitForSave} after the last, or a real {@link StepModel} through the
 * same seam), the simulated per-layer compute on a device clock, then {@code getTransferResults},
 * {@code getBlockIdsWithLoadErrors} and the connector stats, merged over the ranks by the
 * {@link TpOutputAggregator}.
 *
 * <p><b>Threading:</b> owned by the engine's step-loop thread, with the workers' step calls, the
 * models and the aggregator it drives. Other threads only set the compute cost and the stats
 * listener and read the diagnostics counters and the gathered stats (volatile fields, and
 * {@link MooncakeKvConnectorStats#copy()}).
 */
final class ModelRunner {

    private final List<SimWorker> workers;
    private final List<SyntheticModel> models;
    /** A real model computing the tokens instead of the synthetic one (TP 1), or null. */
    private final StepModel stepModel;
    private final Sampling sampling;
    private final TpOutputAggregator aggregator;
    private final MooncakeKvConnectorStats stats = new MooncakeKvConnectorStats();
    private volatile Consumer<MooncakeKvConnectorStats> statsListener = s -> { };
    /** Compute cost of one layer per 1024 prompt tokens computed, in nanoseconds (0: the KV fill only). */
    private volatile long layerComputeNanosPer1k;
    /**
     * Where the step thread's forward passes spent their time, cumulative (written by the step loop
     * only, read by diagnostics): the KV fill, waits for the simulated device, and the connector's
     * layer hooks ({@code saveKvLayer} / {@code waitForSave}).
     */
    private volatile long fillNanos;
    private volatile long deviceWaitNanos;
    private volatile long hookNanos;
    private volatile long hookCalls;
    private volatile long forwardNanos;

    /** A runner over each rank's worker and synthetic model, in rank order. */
    ModelRunner(List<SimWorker> workers, List<SyntheticModel> models, StepModel stepModel, Sampling sampling) {
        this.workers = workers;
        this.models = models;
        this.stepModel = stepModel;
        this.sampling = sampling;
        this.aggregator = new TpOutputAggregator(workers.size());
    }

    /** See {@link SimEngine#layerCompute}; any thread, applies from the next step. */
    void layerComputeNanosPer1k(long nanos) {
        layerComputeNanosPer1k = nanos;
    }

    /** The simulated compute of one layer over {@code prefillTokens} prompt tokens, ns. */
    long layerCost(long prefillTokens) {
        return prefillTokens == 0 ? 0 : layerComputeNanosPer1k * prefillTokens / 1024;
    }

    /** See {@link SimEngine#forwardTimes()}; any thread. */
    long[] forwardTimes() {
        return new long[] {forwardNanos, fillNanos, deviceWaitNanos, hookNanos, hookCalls};
    }

    /** A copy of the connector stats gathered from every rank so far (any thread). */
    MooncakeKvConnectorStats kvConnectorStats() {
        return stats.copy();
    }

    /** See {@link SimEngine#onKvConnectorStats}; any thread. */
    void onKvConnectorStats(Consumer<MooncakeKvConnectorStats> listener) {
        this.statsListener = Objects.requireNonNull(listener, "listener");
    }

    /**
     * Runs the worker side of one step on every rank, in rank order: load start, forward pass of
     * {@code scheduled}, and the ranks' results, merged; block ids with load errors are added to
     * {@code invalidBlocks}.
     */
    SimWorker.TransferResults run(MooncakeConnectorMetadata meta, List<SimRequest> scheduled, boolean layerwise,
            long layerCost, Set<Integer> invalidBlocks) {
        // ---- worker side: start_load_kv, forward, get_finished (per rank, as each rank's model runner does)
        List<SimWorker.TransferResults> results = new ArrayList<>(workers.size());
        for (int rank = 0; rank < workers.size(); rank++) {
            SimWorker w = workers.get(rank);
            // each rank gets its own copy, as each vLLM worker process unpickles its own: the worker
            // keeps per-pull bookkeeping (pull_tasks_count, failed) in the PullReqMeta objects
            w.startLoadKv(rank == 0 ? meta : copyOf(meta));
            SyntheticModel m = models.get(rank);
            long forward0 = scheduled.isEmpty() ? 0 : System.nanoTime();
            if (layerwise && !scheduled.isEmpty() && stepModel != null) {
                forwardModelLayerwise(w, m, scheduled);
            } else if (layerwise && !scheduled.isEmpty()) {
                forwardLayerwise(w, m, scheduled, layerCost);
            } else if (stepModel != null) {
                for (SimRequest r : scheduled) {
                    r.modelToken = stepModel.forward(r.id, r.tokens(), r.blocks[0], r.numComputedTokens, r.numTokens);
                }
            } else {
                long fill0 = System.nanoTime();
                forwardWhole(m, scheduled);
                long wait0 = System.nanoTime();
                // the device ran the fill, then every layer's compute: its clock, not the host's wake-ups
                awaitDevice(wait0 + layerCost * m.numLayers());
                if (!scheduled.isEmpty()) {
                    fillNanos += wait0 - fill0;
                    deviceWaitNanos += System.nanoTime() - wait0;
                }
            }
            if (!scheduled.isEmpty()) {
                forwardNanos += System.nanoTime() - forward0;
            }
            results.add(w.getTransferResults());
            invalidBlocks.addAll(w.getBlockIdsWithLoadErrors());
            w.getKvConnectorStats().ifPresent(s -> {
                stats.aggregate(s);
                statsListener.accept(s);
            });
        }
        return aggregator.aggregate(results);
    }

    /**
     * The real model's forward pass, layer by layer (TP 1): the worker is told each layer once the
     * model copied that layer's rows of every scheduled request into the blocks, so P's transfer of
     * layer {@code l} overlaps the compute of layer {@code l + 1}; {@code waitForSave} after the last.
     */
    private void forwardModelLayerwise(SimWorker w, SyntheticModel names, List<SimRequest> scheduled) {
        List<StepModel.Work> work = new ArrayList<>(scheduled.size());
        for (SimRequest r : scheduled) {
            work.add(new StepModel.Work(r.id, r.tokens(), r.blocks[0], r.numComputedTokens, r.numTokens));
        }
        long[] hooks = new long[2];
        int[] next = stepModel.forwardLayerwise(work, l -> {
            long h0 = System.nanoTime();
            w.saveKvLayer(names.layerName(l));
            hooks[0] += System.nanoTime() - h0;
            hooks[1]++;
        });
        long h0 = System.nanoTime();
        w.waitForSave();
        hookNanos += hooks[0] + System.nanoTime() - h0;
        hookCalls += hooks[1] + 1;
        for (int i = 0; i < scheduled.size(); i++) {
            scheduled.get(i).modelToken = next[i];
        }
    }

    /** One rank's forward pass, layer by layer, telling the worker after each layer and at the end. */
    private void forwardLayerwise(SimWorker w, SyntheticModel m, List<SimRequest> scheduled, long layerCost) {
        boolean digest = sampling == Sampling.KV;
        long[] layerDigest = new long[scheduled.size()];
        // When the simulated device is done with layer l: every layer so far's KV fill (host CPU time
        // standing in for the device's own writes) and compute, back to back on the device's clock, as
        // a GPU runs the kernels a host enqueued ahead. A host thread that wakes late for one layer
        // does not stretch the next ones (the device went on meanwhile); a layer is still saved only
        // once its KV is written and its compute is over.
        long device = System.nanoTime();
        long fillSum = 0;
        long waitSum = 0;
        long hookSum = 0;
        for (int l = 0; l < m.numLayers(); l++) {
            long fill0 = System.nanoTime();
            for (int i = 0; i < scheduled.size(); i++) {
                SimRequest r = scheduled.get(i);
                boolean dg = digest && !r.kvDigestKnown;
                layerDigest[i] += m.forwardLayer(l, r.hashes, r.blocks, r.numComputedTokens, r.numTokens, dg);
            }
            long wait0 = System.nanoTime();
            long fill = wait0 - fill0;
            fillSum += fill;
            device += fill + layerCost;
            awaitDevice(device);
            long hook0 = System.nanoTime();
            waitSum += hook0 - wait0;
            w.saveKvLayer(m.layerName(l));
            hookSum += System.nanoTime() - hook0;
        }
        long hook0 = System.nanoTime();
        w.waitForSave();
        hookSum += System.nanoTime() - hook0;
        fillNanos += fillSum;
        deviceWaitNanos += waitSum;
        hookNanos += hookSum;
        hookCalls += m.numLayers() + 1;
        if (digest) {
            for (int i = 0; i < scheduled.size(); i++) {
                SimRequest r = scheduled.get(i);
                if (!r.kvDigestKnown) {
                    r.kvDigest += layerDigest[i] + m.kvDigest(r.hashes, r.blocks, 0, r.numComputedTokens);
                }
            }
        }
    }

    /**
     * Waits (parked: the host's cores stay free) until the simulated accelerator's clock reaches
     * {@code deadline} ({@link System#nanoTime()}); returns at once when it is past already.
     */
    private static void awaitDevice(long deadline) {
        for (long left = deadline - System.nanoTime(); left > 0; left = deadline - System.nanoTime()) {
            LockSupport.parkNanos(left);
        }
    }

    private void forwardWhole(SyntheticModel m, List<SimRequest> scheduled) {
        {
            for (SimRequest r : scheduled) {
                if (sampling == Sampling.KV && !r.kvDigestKnown) {
                    // the prompt's KV: computed now (digested as written) after the cached prefix (read)
                    r.kvDigest += m.forwardWithDigest(r.hashes, r.blocks, r.numComputedTokens, r.numTokens)
                            + m.kvDigest(r.hashes, r.blocks, 0, r.numComputedTokens);
                } else {
                    m.forward(r.hashes, r.blocks, r.numComputedTokens, r.numTokens);
                }
            }
        }
    }

    /** A deep copy of {@code meta} (fresh {@link PullReqMeta} objects with untouched bookkeeping). */
    static MooncakeConnectorMetadata copyOf(MooncakeConnectorMetadata meta) {
        MooncakeConnectorMetadata c = new MooncakeConnectorMetadata();
        for (Map<String, PullReqMeta> byReq : meta.reqsToRecv().values()) {
            for (Map.Entry<String, PullReqMeta> e : byReq.entrySet()) {
                PullReqMeta pm = e.getValue();
                Map<String, Object> params = new HashMap<>();
                params.put(KvTransferParams.TRANSFER_ID, pm.transferId());
                params.put(KvTransferParams.REMOTE_ENGINE_ID, pm.remoteEngineId());
                params.put(KvTransferParams.REMOTE_BOOTSTRAP_ADDR, pm.remoteBootstrapAddr());
                c.addNewReq(e.getKey(), pm.localBlockIds(), params, true);
            }
        }
        meta.reqsToSend().forEach((id, send) -> c.addNewReq(id, send.localBlockIds(),
                Map.of(KvTransferParams.TRANSFER_ID, send.transferId()), false));
        meta.layerwiseChunks().forEach(c::addLayerwiseChunk);
        c.setReqsNotProcessed(meta.reqsNotProcessed());
        return c;
    }

}
