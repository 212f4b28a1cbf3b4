package io.mooncake4j.sim;

import io.mooncake4j.connector.scheduler.KvCacheBlocks;
import io.mooncake4j.connector.scheduler.MatchedTokens;
import io.mooncake4j.connector.scheduler.MooncakeConnectorScheduler;
import io.mooncake4j.connector.scheduler.RequestFinishedResult;
import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.sim.SimEngine.Limits;
import io.mooncake4j.sim.SimEngine.Sampling;
import io.mooncake4j.sim.SimEngine.Snapshot;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.function.Consumer;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The scheduler side of a {@link SimEngine}'s step, as vLLM's scheduler does it: the request
 * queues (waiting, running, loading remote KV, finished but holding their blocks), admission with
 * the prefix-cache lookup, the connector's {@code getNumNewMatchedTokens} and
 * {@code updateStateAfterAlloc} and the blocks reserved for decode tokens, aborts and stops, the
 * update from the ranks' merged output (sampled tokens, {@code finished_sending},
 * {@code finished_recving} with the received KV verified), and {@code requestFinished} with the
 * blocks freed or kept ({@code delay_free}).
 *
 * <p><b>Threading:</b> owned by the engine's step-loop thread, like the {@link BlockPool}s and the
 * connector scheduler it drives; nothing here is thread-safe. The only field another thread
 * writes is the diagnostics KV-loaded listener (volatile). The engine reads its {@link #snapshot()}
 * on the step thread and publishes it.
 */
final class StepScheduler {

    /** The engine's logger: its log lines keep the name operators and the tests' log capture know. */
    private static final Logger LOG = LoggerFactory.getLogger(SimEngine.class);

    private final String engineId;
    private final MooncakeConnectorScheduler scheduler;
    private final BlockPool[] pools;
    private final int blockSize;
    private final Limits limits;
    private final Sampling sampling;
    /** A real model computing the tokens instead of the synthetic one (TP 1), or null. */
    private final StepModel stepModel;
    /** The synthetic model of each rank: verifies received KV (unless {@link #stepModel} computes). */
    private final List<SyntheticModel> models;
    /** Ids of requests submitted and not finished; shared with {@link SimEngine#submit} (concurrent). */
    private final Set<String> knownIds;
    private final long bytesPerBlockAllRanks;
    /** The shared KV pool (Mooncake Store) beside the prefix cache, or null. */
    private final KvPool kvPool;
    /** Group-0 block ids whose pool save ended: their save's reference is dropped on the step thread. */
    private final java.util.concurrent.ConcurrentLinkedQueue<int[]> savedBlocks = new java.util.concurrent.ConcurrentLinkedQueue<>();
    /** Wakes the step loop (a save ended). */
    private final Runnable wake;
    /** Diagnostics (benchmarks): told a request's id on the step thread when its remote KV load ended (D). */
    private volatile Consumer<String> kvLoadedListener;

    private final ArrayDeque<SimRequest> waiting = new ArrayDeque<>();
    private final List<SimRequest> running = new ArrayList<>();
    private final Map<String, SimRequest> loading = new LinkedHashMap<>();
    private final Map<String, SimRequest> delayedFree = new HashMap<>();
    private final Set<Integer> invalidBlocks = new HashSet<>();
    private int reservedBlocks;
    private long finished;
    private long failed;
    private long steps;

    StepScheduler(String engineId, MooncakeConnectorScheduler scheduler, BlockPool[] pools, int blockSize,
            Limits limits, Sampling sampling, StepModel stepModel, List<SyntheticModel> models,
            Set<String> knownIds, long bytesPerBlockAllRanks) {
        this(engineId, scheduler, pools, blockSize, limits, sampling, stepModel, models, knownIds, bytesPerBlockAllRanks,
                null, () -> { });
    }

    StepScheduler(String engineId, MooncakeConnectorScheduler scheduler, BlockPool[] pools, int blockSize,
            Limits limits, Sampling sampling, StepModel stepModel, List<SyntheticModel> models,
            Set<String> knownIds, long bytesPerBlockAllRanks, KvPool kvPool, Runnable wake) {
        this.kvPool = kvPool;
        this.wake = wake;
        this.engineId = engineId;
        this.scheduler = scheduler;
        this.pools = pools;
        this.blockSize = blockSize;
        this.limits = limits;
        this.sampling = sampling;
        this.stepModel = stepModel;
        this.models = models;
        this.knownIds = knownIds;
        this.bytesPerBlockAllRanks = bytesPerBlockAllRanks;
    }

    private String engineId() {
        return engineId;
    }

    /** See {@link SimEngine#onKvLoaded}; any thread. */
    void onKvLoaded(Consumer<String> listener) {
        kvLoadedListener = listener;
    }

    /** Moves the requests submitted since the last step to the end of the waiting queue. */
    void drainIncoming(BlockingQueue<SimRequest> incoming) {
        incoming.drainTo(waiting);
    }

    /** Whether no request is waiting, running, loading its KV or holding its blocks. */
    boolean idle() {
        return waiting.isEmpty() && running.isEmpty() && loading.isEmpty() && delayedFree.isEmpty();
    }

    /** The block ids some rank reported a load error for, until their request's load ends (the ranks add to it). */
    Set<Integer> invalidBlocks() {
        return invalidBlocks;
    }

    /** The queues and counters as of now (after {@link #update}: the latest step's view). */
    Snapshot snapshot() {
        return new Snapshot(waiting.size(), running.size(), loading.size(), delayedFree.size(),
                pools[0].numFreeBlocks(), finished, failed, steps);
    }

    /**
     * Schedules a step into {@code scheduled}: running decodes first (their blocks taken from their
     * reservation), then waiting requests in arrival order while they fit; true when one was admitted.
     */
    boolean schedule(List<SimRequest> scheduled) {
        for (SimRequest r : running) {
            if (ensureBlocks(r, r.numTokens)) {
                scheduled.add(r);
            }
        }
        int budget = limits.maxNumBatchedTokens();
        boolean admitted = false;
        while (!waiting.isEmpty() && running.size() + loading.size() < limits.maxNumSeqs()) {
            SimRequest r = waiting.peek();
            if (!admit(r, budget, scheduled)) {
                break;
            }
            waiting.poll();
            admitted = true;
            if (r.status == RequestStatus.RUNNING) {
                budget -= r.numTokens - r.numComputedTokens;
            }
        }
        return admitted;
    }

    /**
     * The prompt tokens {@code scheduled} computes this step; with {@code layerwise}, each prefill
     * chunk is recorded with the connector ({@code recordPrefillChunk}) for its layer-wise push.
     */
    long prefillTokens(List<SimRequest> scheduled, boolean layerwise) {
        long prefillTokens = 0;
        for (SimRequest r : scheduled) {
            if (r.numComputedTokens < r.prompt.length) {
                prefillTokens += r.numTokens - r.numComputedTokens;
                if (layerwise) {
                    scheduler.recordPrefillChunk(r, r.blocks, r.numComputedTokens, r.numTokens);
                }
            }
        }
        return prefillTokens;
    }

    /** Applies the aborts (and stops) asked for since the last step: {@code {id, reason}}, a null reason for a stop. */
    boolean applyAborts(Queue<String[]> aborts) {
        boolean changed = false;
        for (String[] a; (a = aborts.poll()) != null; ) {
            String id = a[0];
            String reason = a[1];
            SimRequest r = null;
            for (SimRequest w : waiting) {
                if (w.id.equals(id)) {
                    r = w;
                    break;
                }
            }
            if (r != null && reason == null) {
                r = null; // a stop applies to running requests only
            } else if (r != null) {
                waiting.remove(r);
            } else {
                for (SimRequest w : running) {
                    if (w.id.equals(id)) {
                        r = w;
                        break;
                    }
                }
                if (r != null) {
                    running.remove(r);
                }
            }
            if (r != null && reason == null) {
                r.status = RequestStatus.FINISHED_STOPPED;
                finish(r);
                changed = true;
                LOG.debug("engine {}: request {} stopped", engineId(), id);
            } else if (r != null) {
                r.error = reason;
                r.status = RequestStatus.FINISHED_ABORTED;
                finish(r);
                changed = true;
                LOG.debug("engine {}: request {} aborted: {}", engineId(), id, reason);
            } else if (reason != null && loading.get(id) instanceof SimRequest l && l.abortReason == null) {
                l.abortReason = reason;
                LOG.debug("engine {}: request {} aborted while its KV loads: it ends with the load", engineId(), id);
            }
        }
        return changed;
    }

    static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }

    /** Fails every request not finished yet, those still in {@code incoming} included (the loop ended). */
    void failPending(BlockingQueue<SimRequest> incoming, Throwable cause) {
        List<SimRequest> all = new ArrayList<>(waiting);
        incoming.drainTo(all);
        all.addAll(running);
        all.addAll(loading.values());
        for (SimRequest r : all) {
            knownIds.remove(r.id);
            r.future.completeExceptionally(cause);
        }
        waiting.clear();
        running.clear();
        loading.clear();
    }

    /**
     * The update from the step's output: sampled tokens appended (length-capped requests finish),
     * blocks of requests finished sending freed, and the requests whose load ended resumed or failed;
     * true when a request changed state.
     */
    boolean update(List<SimRequest> scheduled, SimWorker.TransferResults merged, boolean admitted) {
        // ---- update from output
        boolean changed = admitted || !scheduled.isEmpty();
        for (int[] ids; (ids = savedBlocks.poll()) != null; ) {
            pools[0].free(ids);
        }
        for (SimRequest r : scheduled) {
            if (kvPool != null && r.numComputedTokens < r.prompt.length && r.numTokens >= r.prompt.length) {
                savePrompt(r);
            }
            r.numComputedTokens = r.numTokens;
            cacheFullBlocks(r, r.numComputedTokens);
            if (r.kvReadyNanos == 0) {
                r.kvReadyNanos = System.nanoTime();
            }
            int token;
            if (stepModel != null) {
                token = r.modelToken;
            } else if (sampling == Sampling.KV) {
                r.kvDigestKnown = true; // summed over the ranks' forward above (prefills run whole)
                token = SyntheticModel.sample(r.hashes[r.numTokens - 1], r.kvDigest);
            } else {
                token = SyntheticModel.sample(r.hashes[r.numTokens - 1]);
            }
            r.appendToken(token);
            if (r.onToken != null) {
                try {
                    r.onToken.accept(token);
                } catch (RuntimeException e) {
                    LOG.warn("engine {}: the token listener of request {} failed", engineId(), r.id, e);
                }
            }
            if (r.numOutput >= r.maxTokens) {
                r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
                running.remove(r);
                finish(r);
            }
        }
        for (String id : merged.finishedSending()) {
            changed = true;
            SimRequest r = delayedFree.remove(id);
            if (r == null) {
                LOG.warn("engine {}: finished_sending for unknown request {}", engineId(), id);
            } else {
                freeBlocks(r);
            }
        }
        for (String id : merged.finishedRecving()) {
            changed = true;
            SimRequest r = loading.remove(id);
            if (r == null) {
                LOG.warn("engine {}: finished_recving for unknown request {}", engineId(), id);
                continue;
            }
            onRemoteKvLoaded(r, merged.failedRecving().contains(id));
        }
        steps++;
        return changed;
    }

    /**
     * Hands the prompt's full blocks (computed this step, or found) to the pool to save; each holds one
     * more reference until the save released it, so that no other request overwrites it meanwhile.
     */
    private void savePrompt(SimRequest r) {
        int full = Math.min(r.prompt.length / blockSize, r.numBlocks);
        if (full == 0) {
            return;
        }
        int[] ids = Arrays.copyOf(r.blocks[0], full);
        pools[0].touch(ids);
        kvPool.save(r.id, ids, 0, full, () -> {
            savedBlocks.add(ids);
            wake.run();
        });
    }

    /** Tries to admit the head of the waiting queue; false when it does not fit this step. */
    private boolean admit(SimRequest r, int budget, List<SimRequest> scheduled) {
        int n = r.prompt.length;
        long[] blockHashes = SyntheticModel.blockHashes(r.hashes, n, blockSize);
        int maxHit = (n - 1) / blockSize; // at least one token is always computed (or loaded)
        int[][] hits = new int[pools.length][];
        int hit = Integer.MAX_VALUE;
        for (int g = 0; g < pools.length; g++) {
            hits[g] = pools[g].findCachedPrefix(blockHashes, maxHit);
            hit = Math.min(hit, hits[g].length);
        }
        int numComputed = hit * blockSize;
        MatchedTokens matched = scheduler.getNumNewMatchedTokens(r, numComputed);
        // the pool is asked when the P2P connector has nothing (vLLM's MultiConnector: the first with a hit)
        int poolTokens = kvPool != null && matched.numExternalTokens() == 0 && !matched.loadKvAsync()
                ? kvPool.matchedTokens(r.id, r.prompt, numComputed) : 0;
        int promptBlocks = ceilDiv(n, blockSize);
        int newBlocks = promptBlocks - hit;
        int reserve = ceilDiv(n + r.maxTokens - 1, blockSize) - promptBlocks;
        if (!matched.loadKvAsync() && !scheduled.isEmpty()
                && n - numComputed - matched.numExternalTokens() - poolTokens > budget) {
            return false;
        }
        for (int g = 0; g < pools.length; g++) {
            int revived = 0;
            for (int k = 0; k < hit; k++) {
                if (pools[g].refCount(hits[g][k]) == 0) {
                    revived++;
                }
            }
            if (pools[g].numFreeBlocks() - reservedBlocks < newBlocks + reserve + revived) {
                return false;
            }
        }
        int[][] fresh = new int[pools.length][];
        for (int g = 0; g < pools.length; g++) {
            int[] h = Arrays.copyOf(hits[g], hit);
            pools[g].touch(h);
            fresh[g] = pools[g].allocate(newBlocks);
            int[] all = Arrays.copyOf(h, hit + newBlocks);
            System.arraycopy(fresh[g], 0, all, hit, newBlocks);
            r.blocks[g] = all;
        }
        r.numBlocks = promptBlocks;
        r.reservedBlocks = reserve;
        reservedBlocks += reserve;
        r.localHitTokens = numComputed;
        r.numComputedTokens = numComputed;
        if (poolTokens > 0) {
            // loaded into the fresh blocks now; what did not arrive is computed with the rest
            int loaded = kvPool.load(r.id, r.blocks[0], hit, hit + poolTokens / blockSize);
            r.numComputedTokens += loaded * blockSize;
        }
        scheduler.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(fresh), matched.numExternalTokens());
        if (matched.loadKvAsync()) {
            r.externalTokens = matched.numExternalTokens();
            r.pulledBlocks = newBlocks;
            r.status = RequestStatus.WAITING_FOR_REMOTE_KVS;
            loading.put(r.id, r);
        } else {
            r.status = RequestStatus.RUNNING;
            running.add(r);
            scheduled.add(r);
        }
        return true;
    }

    /** Makes sure the request has blocks for positions below {@code numTokens}, taking from its reservation. */
    private boolean ensureBlocks(SimRequest r, int numTokens) {
        int need = ceilDiv(numTokens, blockSize) - r.numBlocks;
        if (need <= 0) {
            return true;
        }
        for (BlockPool p : pools) {
            if (p.numFreeBlocks() < need) {
                LOG.warn("engine {}: no free block for request {} (reservation accounting broken?)", engineId(), r.id);
                return false;
            }
        }
        int[][] add = new int[pools.length][];
        for (int g = 0; g < pools.length; g++) {
            add[g] = pools[g].allocate(need);
        }
        r.addBlocks(add);
        int fromReserve = Math.min(need, r.reservedBlocks);
        r.reservedBlocks -= fromReserve;
        reservedBlocks -= fromReserve;
        return true;
    }

    private void cacheFullBlocks(SimRequest r, int computedTokens) {
        int full = Math.min(computedTokens / blockSize, r.numBlocks);
        for (int k = 0; k < full; k++) {
            long h = r.hashes[(k + 1) * blockSize - 1];
            for (int g = 0; g < pools.length; g++) {
                pools[g].cacheBlock(r.blocks[g][k], h);
            }
        }
    }

    /** D: the load of {@code r} ended (all ranks reported it). */
    private void onRemoteKvLoaded(SimRequest r, boolean failedPerRequest) {
        r.kvReadyNanos = System.nanoTime();
        Consumer<String> l = kvLoadedListener;
        if (l != null) {
            try {
                l.accept(r.id);
            } catch (RuntimeException e) {
                LOG.warn("engine {}: the KV-loaded listener failed for request {}", engineId(), r.id, e);
            }
        }
        if (r.abortReason != null) {
            for (int[] group : r.blocks) {
                for (int b : group) {
                    invalidBlocks.remove(b);
                }
            }
            r.error = r.abortReason;
            r.status = RequestStatus.FINISHED_ABORTED;
            finish(r);
            return;
        }
        boolean badBlocks = false;
        for (int[] group : r.blocks) {
            for (int b : group) {
                badBlocks |= invalidBlocks.remove(b);
            }
        }
        if (failedPerRequest || badBlocks) {
            r.error = failedPerRequest ? "KV load failed (failed_recving)" : "KV load failed (invalid block ids)";
            r.status = RequestStatus.FINISHED_ERROR;
            finish(r);
            return;
        }
        int n = r.prompt.length;
        long digest = 0;
        String mismatch = null;
        for (SyntheticModel m : stepModel != null ? List.<SyntheticModel>of() : models) {
            SyntheticModel.Verification v = m.verify(r.hashes, r.blocks, 0, n);
            r.bytesVerified += v.bytesChecked();
            r.mismatchedWords += v.badWords();
            digest += v.digest();
            if (!v.ok() && mismatch == null) {
                mismatch = "received KV does not match: " + v.badWords() + " wrong 8-byte words; first at "
                        + v.firstMismatch();
            }
        }
        // the digest of the received bytes, taken before the last prompt position is computed again
        r.kvDigest = digest;
        r.kvDigestKnown = true;
        if (mismatch != null && sampling == Sampling.KV) {
            LOG.warn("engine {}: request {}: {}; decoding on the KV as received", engineId(), r.id, mismatch);
        } else if (mismatch != null) {
            r.error = mismatch;
        }
        if (r.error != null) {
            LOG.error("engine {}: request {}: {}", engineId(), r.id, r.error);
            r.status = RequestStatus.FINISHED_ERROR;
            finish(r);
            return;
        }
        cacheFullBlocks(r, n);
        // like vLLM, the last prompt token is computed again to sample the first output token
        r.numComputedTokens = n - 1;
        r.status = RequestStatus.RUNNING;
        running.add(r);
    }

    /** A request reached a finished status: tell the connector, then free or keep its blocks. */
    private void finish(SimRequest r) {
        if (stepModel != null) {
            stepModel.release(r.id);
        }
        if (kvPool != null) {
            kvPool.requestFinished(r.id);
        }
        RequestFinishedResult res = scheduler.requestFinished(r, r.blocks);
        reservedBlocks -= r.reservedBlocks;
        r.reservedBlocks = 0;
        finished++;
        boolean normalEnd = r.status == RequestStatus.FINISHED_LENGTH_CAPPED || r.status == RequestStatus.FINISHED_STOPPED;
        if (!normalEnd || r.error != null) {
            failed++;
        }
        if (res.delayFreeBlocks()) {
            delayedFree.put(r.id, r);
        } else {
            freeBlocks(r);
        }
        knownIds.remove(r.id);
        r.future.complete(r.result(engineId(), bytesPerBlockAllRanks));
    }

    private void freeBlocks(SimRequest r) {
        for (int g = 0; g < pools.length; g++) {
            int[] ids = Arrays.copyOf(r.blocks[g], r.numBlocks);
            // tail blocks first, so that they are evicted before the shared prefix (as vLLM does)
            for (int i = 0, j = ids.length - 1; i < j; i++, j--) {
                int t = ids[i];
                ids[i] = ids[j];
                ids[j] = t;
            }
            pools[g].free(ids);
        }
        r.numBlocks = 0;
        Arrays.setAll(r.blocks, g -> new int[0]);
    }
}
