package io.mooncake4j.connector.worker.plan;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.IntPredicate;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Transfer planning of the P send path: vLLM's {@code _build_transfer_params} (spec §6.8)
 * with its region preparation (§6.6, §6.7 checks, §6.10 offsets).
 *
 * <p>Use per side-channel message: {@link TransferTopology#pairingError} →
 * {@link #regions} for both sides → {@link #prepare} (alignment + validation + per-pair plan)
 * → per ready wave {@link #plan} (or {@link #planRequest} per request) into a
 * {@link DescriptorBuffer}. Descriptor order: requests in the given order → aligned regions in
 * local registration order → contiguous runs in block order → blocks.
 *
 * <p>Not thread-safe (reusable scratch arrays): one planner per sender-loop thread.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vLLM {@code mooncake_connector.py} {@code _build_transfer_params}</a>
 */
public final class TransferPlanner {

    private static final Logger LOG = LoggerFactory.getLogger(TransferPlanner.class);

    /** Per-request error: P has fewer blocks than D in some KV group. */
    public static final String P_NUM_BLOCKS_LESS_THAN_D = "P num blocks less than D";
    /** Per-request error: P and D disagree on the number of KV groups. */
    public static final String KV_GROUP_COUNT_MISMATCH = "KV group count mismatch";
    /** vLLM's null block id; filtered out of Mamba groups before pairing. */
    public static final int NULL_BLOCK_ID = 0;

    static final String REGION_GROUP_MISMATCH = "Aligned Mooncake transfer regions must belong to the same KV group.";
    static final String MISSING_GROUP = "Transfer region references a missing KV group.";
    static final String SRC_EXCEEDS = "Computed source transfer region exceeds local KV block size.";
    static final String DST_EXCEEDS = "Destination transfer region exceeds remote KV block size.";

    private final TransferTopology topology;
    private final int kernelBlockFactor;
    private final IntPredicate mambaGroup;

    // scratch, reused across requests
    private int[][] groupLocal = new int[4][];
    private int[][] groupRemote = new int[4][];
    private int[] groupLocalStart = new int[4];
    private int[] groupCount = new int[4];
    private int[] groupRunFrom = new int[5];
    private int[] runStart = new int[256];
    private int[] runLength = new int[256];

    /**
     * @param topology          this worker's TP facts and the Variant A/B switch
     * @param kernelBlockFactor vLLM's {@code _physical_blocks_per_logical_kv_block} (1 when the
     *                          attention kernel's block size equals the logical block size)
     * @param mambaGroup        true for transfer-group indices whose spec is a Mamba/GDN spec
     */
    public TransferPlanner(TransferTopology topology, int kernelBlockFactor, IntPredicate mambaGroup) {
        this.topology = Objects.requireNonNull(topology, "topology");
        if (kernelBlockFactor < 1) {
            throw new IllegalArgumentException("kernelBlockFactor must be >= 1, got " + kernelBlockFactor);
        }
        this.kernelBlockFactor = kernelBlockFactor;
        this.mambaGroup = Objects.requireNonNull(mambaGroup, "mambaGroup");
    }

    /** A planner for attention-only models with no kernel-block split. */
    public TransferPlanner(TransferTopology topology) {
        this(topology, 1, g -> false);
    }

    public TransferTopology topology() {
        return topology;
    }

    public int kernelBlockFactor() {
        return kernelBlockFactor;
    }

    /**
     * Builds regions from registration/metadata arrays with this planner's Variant A/B switch
     * (§6.6): MLA regions and Mamba groups are never split.
     *
     * @see TransferRegions#getTransferRegions
     */
    public List<TransferRegion> regions(long[] baseAddrs, long[] blockLens, long[] kvBlockLens, List<String> layerNames,
            int[] layerIndices, int[] groupIndices, ToIntFunction<String> groupOfLayer) {
        return TransferRegions.getTransferRegions(baseAddrs, blockLens, kvBlockLens, layerNames, layerIndices,
                groupIndices, groupOfLayer, topology.virtuallySplitKvInBlocks(),
                g -> topology.mla() || mambaGroup.test(g));
    }

    /** vLLM's {@code allow_partial_layers} rule: D has several PP stages that differ from ours. */
    public static boolean allowPartialLayers(int remotePpSize, int localPpSize) {
        return remotePpSize > 1 && remotePpSize != localPpSize;
    }

    /**
     * Aligns the regions (§6.6), validates asymmetric-TP lengths (§6.10) and precomputes each
     * pair's sender plan for D rank {@code remoteTpRank} of size {@code remoteTpSize}. A
     * non-null {@link PreparedRegions#error()} is the message of the {@code ERROR} response.
     * Without layer facts the head re-sharding layout check passes (see the overload).
     */
    public PreparedRegions prepare(List<TransferRegion> local, List<TransferRegion> remote, int remoteTpRank,
            int remoteTpSize, boolean allowPartialLayers) {
        return prepare(local, remote, remoteTpRank, remoteTpSize, allowPartialLayers, name -> null);
    }

    /**
     * As {@link #prepare(List, List, int, int, boolean)}, with vLLM's head re-sharding layout
     * check first ({@link TransferRegions#validateHeadReshardingLayout}) using the local layer
     * facts from {@code layoutOfLayer} (null: not an attention layer).
     */
    public PreparedRegions prepare(List<TransferRegion> local, List<TransferRegion> remote, int remoteTpRank,
            int remoteTpSize, boolean allowPartialLayers, Function<String, LayerLayout> layoutOfLayer) {
        TransferRegions.Alignment alignment = TransferRegions.align(local, remote, allowPartialLayers);
        if (!alignment.ok()) {
            return PreparedRegions.failed(alignment.error());
        }
        boolean producerReplicated = topology.localReplicatesKvCache();
        int heads = topology.headCountForResharding();
        String err = TransferRegions.validateHeadReshardingLayout(topology, remoteTpSize, alignment.local(),
                layoutOfLayer);
        if (err == null) {
            err = TransferRegions.validateAsymmetricRegionLengths(alignment.local(), alignment.remote(),
                    topology.tpSize(), remoteTpSize, producerReplicated, heads);
        }
        if (err != null) {
            return PreparedRegions.failed(err);
        }
        return preparePairs(alignment.local(), alignment.remote(), remoteTpRank, remoteTpSize);
    }

    /** Precomputes the per-pair plans of already aligned and validated lists. */
    public PreparedRegions preparePairs(List<TransferRegion> alignedLocal, List<TransferRegion> alignedRemote,
            int remoteTpRank, int remoteTpSize) {
        if (alignedLocal.size() != alignedRemote.size()) {
            throw new IllegalArgumentException("aligned lists differ in length: " + alignedLocal.size() + " vs "
                    + alignedRemote.size());
        }
        int n = alignedLocal.size();
        PreparedRegions p = new PreparedRegions(alignedLocal, alignedRemote, null, n);
        boolean producerReplicated = topology.localReplicatesKvCache();
        int heads = topology.headCountForResharding();
        for (int i = 0; i < n; i++) {
            TransferRegion lr = alignedLocal.get(i);
            TransferRegion rr = alignedRemote.get(i);
            p.group[i] = lr.groupIndex();
            p.srcBase[i] = lr.baseAddr();
            p.dstBase[i] = rr.baseAddr();
            p.srcStride[i] = lr.blockLen();
            p.dstStride[i] = rr.blockLen();
            if (lr.groupIndex() != rr.groupIndex()) {
                p.preError[i] = REGION_GROUP_MISMATCH;
                continue;
            }
            SenderTransferPlan plan;
            try {
                plan = TransferTopology.computeSenderTransferPlan(topology.tpRank(), topology.tpSize(), remoteTpRank,
                        remoteTpSize, lr.kvBlockLen(), rr.kvBlockLen(), producerReplicated, heads);
            } catch (TransferPlanningException e) {
                p.planFailed[i] = true;
                p.postError[i] = e.getMessage();
                continue;
            }
            p.shouldTransfer[i] = plan.shouldTransfer();
            p.srcOffset[i] = plan.srcOffset();
            p.dstOffset[i] = plan.dstOffset();
            p.transferLen[i] = plan.transferLen();
            if (plan.shouldTransfer()) {
                if (plan.srcOffset() + plan.transferLen() > lr.kvBlockLen()) {
                    p.postError[i] = SRC_EXCEEDS;
                } else if (plan.dstOffset() + plan.transferLen() > rr.kvBlockLen()) {
                    p.postError[i] = DST_EXCEEDS;
                }
            }
            p.coalesce[i] = plan.srcOffset() == 0 && plan.dstOffset() == 0
                    && plan.transferLen() == lr.blockLen() && plan.transferLen() == rr.blockLen();
        }
        return p;
    }

    /**
     * Plans a ready wave: appends every request's descriptors to {@code out} (which is not
     * cleared) and every per-request failure to {@code errors}.
     *
     * @throws TransferPlanningException on failures vLLM raises (a region of a missing KV group,
     *         an out-of-bounds plan): answer the whole message with {@code ERROR}; {@code out}
     *         then holds a partial plan and must be discarded
     */
    public void plan(List<? extends ReadyRequest> ready, PreparedRegions regions, DescriptorBuffer out,
            PlanErrors errors) {
        for (int i = 0, n = ready.size(); i < n; i++) {
            ReadyRequest r = ready.get(i);
            String err = planRequest(r.dReqId(), r.localBlockIds(), r.remoteBlockIds(), regions, out);
            if (err != null) {
                errors.add(r.dReqId(), err);
            }
        }
    }

    /**
     * Plans one request into {@code out}. Returns null on success (including "nothing to
     * send"), or {@link #KV_GROUP_COUNT_MISMATCH} / {@link #P_NUM_BLOCKS_LESS_THAN_D}, in which
     * case nothing was appended.
     *
     * @param localBlockIds  P's block ids per KV group
     * @param remoteBlockIds D's block ids per KV group
     * @throws TransferPlanningException see {@link #plan}
     */
    public String planRequest(String dReqId, int[][] localBlockIds, int[][] remoteBlockIds, PreparedRegions regions,
            DescriptorBuffer out) {
        if (!regions.ok()) {
            throw new IllegalArgumentException("cannot plan with failed regions: " + regions.error());
        }
        if (allEmpty(remoteBlockIds)) {
            return null;
        }
        int groups = remoteBlockIds.length;
        if (localBlockIds.length != groups) {
            LOG.error("req {}: KV group count mismatch: local={}, remote={}", dReqId, localBlockIds.length, groups);
            return KV_GROUP_COUNT_MISMATCH;
        }
        ensureGroupScratch(groups);
        boolean anyLocal = false;
        int totalBlocks = 0;
        for (int g = 0; g < groups; g++) {
            int[] lg = localBlockIds[g];
            int[] rg = remoteBlockIds[g];
            boolean mamba = mambaGroup.test(g);
            if (mamba) {
                lg = withoutNullBlocks(lg);
                rg = withoutNullBlocks(rg);
            }
            if (lg.length < rg.length) {
                LOG.error("req {}: local blocks({}) < remote blocks({}) in a KV cache group (is_mamba_group={})",
                        dReqId, lg.length, rg.length, mamba ? "True" : "False");
                Arrays.fill(groupLocal, 0, g, null);
                Arrays.fill(groupRemote, 0, g, null);
                return P_NUM_BLOCKS_LESS_THAN_D;
            }
            // D had a local prefix hit: send only the uncomputed tail (positional pairing after trimming)
            groupLocal[g] = lg;
            groupRemote[g] = rg;
            groupLocalStart[g] = lg.length - rg.length;
            groupCount[g] = rg.length;
            anyLocal |= rg.length > 0;
            totalBlocks += rg.length;
        }
        if (!anyLocal) {
            return null;
        }
        computeRuns(groups, totalBlocks);
        try {
            emit(regions, groups, out);
        } finally {
            Arrays.fill(groupLocal, 0, groups, null); // do not keep the caller's arrays reachable
            Arrays.fill(groupRemote, 0, groups, null);
        }
        return null;
    }

    private void emit(PreparedRegions p, int groups, DescriptorBuffer out) {
        for (int i = 0; i < p.count; i++) {
            if (p.preError[i] != null) {
                throw new TransferPlanningException(p.preError[i]);
            }
            int g = p.group[i];
            if (g < 0 || g >= groups) {
                throw new TransferPlanningException(MISSING_GROUP);
            }
            int count = groupCount[g];
            if (count == 0) {
                continue;
            }
            if (p.postError[i] != null) {
                throw new TransferPlanningException(p.postError[i]);
            }
            if (!p.shouldTransfer[i]) {
                continue; // replicated KV: another P rank sends these bytes
            }
            long f = mambaGroup.test(g) ? 1 : kernelBlockFactor;
            int[] lg = groupLocal[g];
            int[] rg = groupRemote[g];
            int lStart = groupLocalStart[g];
            long srcBase = p.srcBase[i] + p.srcOffset[i];
            long dstBase = p.dstBase[i] + p.dstOffset[i];
            long srcStride = p.srcStride[i];
            long dstStride = p.dstStride[i];
            long len = p.transferLen[i];
            int runFrom = groupRunFrom[g];
            int runTo = groupRunFrom[g + 1];
            if (p.coalesce[i] && runTo - runFrom == count) {
                // fully fragmented: every run is one logical block; same list, no run indirection
                out.ensureAdditional(count);
                long[] sa = out.srcArray();
                long[] da = out.dstArray();
                long[] la = out.lenArray();
                int pos = out.size();
                long blockBytes = len * f;
                long srcStep = f * srcStride;
                long dstStep = f * dstStride;
                for (int j = 0; j < count; j++) {
                    sa[pos] = srcBase + lg[lStart + j] * srcStep;
                    da[pos] = dstBase + rg[j] * dstStep;
                    la[pos] = blockBytes;
                    pos++;
                }
                out.commitRaw(pos, blockBytes * count);
            } else if (p.coalesce[i]) {
                // one descriptor per contiguous run (runs are the same on both sides; runStart is the
                // pair with the lowest ids, the first of an ascending run or the last of a descending one)
                out.ensureAdditional(runTo - runFrom);
                long[] sa = out.srcArray();
                long[] da = out.dstArray();
                long[] la = out.lenArray();
                int pos = out.size();
                long bytes = 0;
                for (int r = runFrom; r < runTo; r++) {
                    int s = runStart[r];
                    long runBytes = len * runLength[r] * f;
                    sa[pos] = srcBase + lg[lStart + s] * f * srcStride;
                    da[pos] = dstBase + rg[s] * f * dstStride;
                    la[pos] = runBytes;
                    bytes += runBytes;
                    pos++;
                }
                out.commitRaw(pos, bytes);
            } else {
                // one descriptor per (kernel) block, in block order: the runs keep block order,
                // so walking the blocks directly yields the same list
                long descriptors = count * f;
                if (descriptors > Integer.MAX_VALUE - 8L) {
                    throw new TransferPlanningException("too many transfer descriptors: " + descriptors);
                }
                out.ensureAdditional((int) descriptors);
                long[] sa = out.srcArray();
                long[] da = out.dstArray();
                long[] la = out.lenArray();
                int pos = out.size();
                if (f == 1) {
                    for (int j = 0; j < count; j++) {
                        sa[pos] = srcBase + lg[lStart + j] * srcStride;
                        da[pos] = dstBase + rg[j] * dstStride;
                        la[pos] = len;
                        pos++;
                    }
                } else {
                    for (int j = 0; j < count; j++) {
                        long lb = lg[lStart + j] * f;
                        long rb = rg[j] * f;
                        for (long q = 0; q < f; q++) {
                            sa[pos] = srcBase + (lb + q) * srcStride;
                            da[pos] = dstBase + (rb + q) * dstStride;
                            la[pos] = len;
                            pos++;
                        }
                    }
                }
                out.commitRaw(pos, len * descriptors);
            }
        }
    }

    /**
     * vLLM's {@code group_concurrent_contiguous} on the trimmed pairs of every group, as
     * (lowest pair, length) runs, and, beyond it, descending runs too: pairs whose ids both fall
     * by one are the same bytes as the ascending run they reverse (each local block still lands
     * on its own remote block), so one descriptor carries them. vLLM's allocator frees a
     * request's blocks in reverse order, so a request that reuses them gets descending ids on
     * both sides; with ascending runs only, each of its blocks would be a descriptor of its own.
     * Splitting logical ids is the same as splitting the kernel-block expansion: inside a logical
     * block the expanded ids are consecutive, and two logical blocks join iff their ids are
     * consecutive.
     */
    private void computeRuns(int groups, int totalBlocks) {
        if (runStart.length < totalBlocks) {
            int cap = Math.max(totalBlocks, runStart.length * 2);
            runStart = new int[cap];
            runLength = new int[cap];
        }
        int runs = 0;
        for (int g = 0; g < groups; g++) {
            groupRunFrom[g] = runs;
            int count = groupCount[g];
            if (count == 0) {
                continue;
            }
            int[] lg = groupLocal[g];
            int[] rg = groupRemote[g];
            int lStart = groupLocalStart[g];
            int start = 0;
            int dir = 0; // of the run from start: 1 ascending, -1 descending, 0 one pair so far
            for (int k = 1; k < count; k++) {
                int dl = lg[lStart + k] - lg[lStart + k - 1];
                int dr = rg[k] - rg[k - 1];
                boolean joins = dl == dr && (dl == 1 || dl == -1) && (dir == 0 || dir == dl);
                if (joins) {
                    dir = dl;
                    continue;
                }
                runStart[runs] = dir < 0 ? k - 1 : start;
                runLength[runs] = k - start;
                runs++;
                start = k;
                dir = 0;
            }
            runStart[runs] = dir < 0 ? count - 1 : start;
            runLength[runs] = count - start;
            runs++;
        }
        groupRunFrom[groups] = runs;
    }

    private void ensureGroupScratch(int groups) {
        if (groupLocal.length < groups) {
            int cap = Math.max(groups, groupLocal.length * 2);
            groupLocal = new int[cap][];
            groupRemote = new int[cap][];
            groupLocalStart = new int[cap];
            groupCount = new int[cap];
            groupRunFrom = new int[cap + 1];
        }
    }

    private static boolean allEmpty(int[][] groups) {
        if (groups == null) {
            return true;
        }
        for (int[] g : groups) {
            if (g.length != 0) {
                return false;
            }
        }
        return true;
    }

    private static int[] withoutNullBlocks(int[] ids) {
        int nulls = 0;
        for (int id : ids) {
            if (id == NULL_BLOCK_ID) {
                nulls++;
            }
        }
        if (nulls == 0) {
            return ids;
        }
        int[] kept = new int[ids.length - nulls];
        int k = 0;
        for (int id : ids) {
            if (id != NULL_BLOCK_ID) {
                kept[k++] = id;
            }
        }
        return kept;
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "TransferPlanner[%s, kernelBlockFactor=%d]", topology, kernelBlockFactor);
    }
}
