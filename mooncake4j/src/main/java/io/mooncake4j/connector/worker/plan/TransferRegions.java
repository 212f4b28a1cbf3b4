package io.mooncake4j.connector.worker.plan;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntPredicate;
import java.util.function.ToIntFunction;

/**
 * Region construction, alignment and validation (spec §6.6, §6.10): vLLM's
 * {@code _get_transfer_regions}, {@code _expand_transfer_regions},
 * {@code _align_transfer_regions} and {@code _validate_asymmetric_region_lengths}.
 *
 * <p>The inputs are the parallel arrays that D sends in {@code MooncakeXferMetadata}
 * ({@code kv_caches_base_addr}, {@code block_lens}, {@code kv_block_lens},
 * {@code registered_layer_names}, {@code registered_layer_indices},
 * {@code registered_group_indices}) and that the local registration produces.
 */
public final class TransferRegions {

    private TransferRegions() {
    }

    /** Aligned region lists (same length, pairwise matched) or an error message. */
    public record Alignment(List<TransferRegion> local, List<TransferRegion> remote, String error) {

        public Alignment {
            local = List.copyOf(local);
            remote = List.copyOf(remote);
        }

        public boolean ok() {
            return error == null;
        }

        static Alignment failed(String error) {
            return new Alignment(List.of(), List.of(), error);
        }
    }

    /**
     * vLLM's {@code _get_transfer_regions}: when {@code groupIndices} is null or empty (an
     * older peer that omitted the field), each region's group is {@code groupOfLayer} of its
     * layer name (vLLM: {@code transfer_group_index_by_layer.get(name, 0)}); then
     * {@link #expand}.
     *
     * @param groupOfLayer  the local layer-name → transfer-group map, 0 for unknown names
     * @param splitKv       Variant B: split every region whose group {@code unsplittableGroup}
     *                      does not name into a K and a V region
     * @param unsplittableGroup groups never split (Mamba/GDN groups; every group for MLA)
     * @throws TransferPlanningException when the arrays' lengths differ
     */
    public static List<TransferRegion> getTransferRegions(long[] baseAddrs, long[] blockLens, long[] kvBlockLens,
            List<String> layerNames, int[] layerIndices, int[] groupIndices, ToIntFunction<String> groupOfLayer,
            boolean splitKv, IntPredicate unsplittableGroup) {
        int[] groups = groupIndices;
        if (groups == null || groups.length == 0) {
            groups = new int[layerNames.size()];
            for (int i = 0; i < groups.length; i++) {
                groups[i] = groupOfLayer.applyAsInt(layerNames.get(i));
            }
        }
        return expand(baseAddrs, blockLens, kvBlockLens, layerNames, layerIndices, groups, splitKv,
                unsplittableGroup);
    }

    /**
     * vLLM's {@code _expand_transfer_regions}. Variant A ({@code splitKv == false}): one region
     * per index, same order. Variant B: a splittable entry {@code (base, blockLen, kvBlockLen)}
     * becomes {@code K = (base, blockLen, kvBlockLen)} followed by
     * {@code V = (base + kvBlockLen, blockLen, kvBlockLen)}.
     *
     * @param groupIndices null for all zeros
     * @throws TransferPlanningException when the arrays' lengths differ
     */
    public static List<TransferRegion> expand(long[] baseAddrs, long[] blockLens, long[] kvBlockLens,
            List<String> layerNames, int[] layerIndices, int[] groupIndices, boolean splitKv,
            IntPredicate unsplittableGroup) {
        int n = baseAddrs.length;
        if (blockLens.length != n || kvBlockLens.length != n || layerNames.size() != n || layerIndices.length != n) {
            throw new TransferPlanningException(String.format(Locale.ROOT,
                    "Mooncake transfer regions require matching metadata lengths, got base_addrs=%d, "
                            + "block_lens=%d, kv_block_lens=%d, layer_names=%d, layer_indices=%d.",
                    n, blockLens.length, kvBlockLens.length, layerNames.size(), layerIndices.length));
        }
        if (groupIndices != null && groupIndices.length != n) {
            throw new TransferPlanningException(String.format(Locale.ROOT,
                    "Mooncake transfer regions require matching group metadata lengths, got group_indices=%d, "
                            + "regions=%d.", groupIndices.length, n));
        }
        List<TransferRegion> regions = new ArrayList<>(splitKv ? 2 * n : n);
        for (int i = 0; i < n; i++) {
            int group = groupIndices == null ? 0 : groupIndices[i];
            String name = layerNames.get(i);
            if (splitKv && !unsplittableGroup.test(group)) {
                regions.add(new TransferRegion(name, layerIndices[i], baseAddrs[i], blockLens[i], kvBlockLens[i], group));
                regions.add(new TransferRegion(name, layerIndices[i], baseAddrs[i] + kvBlockLens[i], blockLens[i],
                        kvBlockLens[i], group));
            } else {
                regions.add(new TransferRegion(name, layerIndices[i], baseAddrs[i], blockLens[i], kvBlockLens[i], group));
            }
        }
        return regions;
    }

    /**
     * vLLM's {@code _align_transfer_regions}: pairs every local region with the remote region
     * of the same {@code (layer name, occurrence)} key, in local order. Remote regions without
     * a local counterpart are ignored (a P pipeline stage sends only its own layers).
     *
     * @param allowPartialLayers skip a local layer the consumer does not have at all (vLLM
     *                           passes {@code remote_pp_size > 1 and remote_pp_size != pp_size})
     */
    public static Alignment align(List<TransferRegion> local, List<TransferRegion> remote,
            boolean allowPartialLayers) {
        Map<String, List<TransferRegion>> remoteByName = new HashMap<>();
        for (TransferRegion r : remote) {
            remoteByName.computeIfAbsent(r.layerName(), k -> new ArrayList<>(2)).add(r);
        }
        Map<String, Integer> occurrences = new HashMap<>();
        List<TransferRegion> alignedLocal = new ArrayList<>(local.size());
        List<TransferRegion> alignedRemote = new ArrayList<>(local.size());
        for (TransferRegion l : local) {
            String name = l.layerName();
            int occurrence = occurrences.merge(name, 1, Integer::sum) - 1;
            List<TransferRegion> candidates = remoteByName.get(name);
            if (candidates == null || occurrence >= candidates.size()) {
                if (allowPartialLayers && candidates == null) {
                    continue;
                }
                return Alignment.failed(String.format(Locale.ROOT,
                        "Mooncake producer registered layer has no matching consumer occurrence: %s occurrence %d.",
                        name, occurrence));
            }
            TransferRegion r = candidates.get(occurrence);
            if (l.layerIndex() != r.layerIndex()) {
                return Alignment.failed(String.format(Locale.ROOT,
                        "Mooncake registered layer index mismatch for %s: producer=%d, consumer=%d.",
                        name, l.layerIndex(), r.layerIndex()));
            }
            if (l.groupIndex() != r.groupIndex()) {
                return Alignment.failed(String.format(Locale.ROOT,
                        "Mooncake registered group index mismatch for %s: producer=%d, consumer=%d.",
                        name, l.groupIndex(), r.groupIndex()));
            }
            alignedLocal.add(l);
            alignedRemote.add(r);
        }
        return new Alignment(alignedLocal, alignedRemote, null);
    }

    /**
     * vLLM's {@code _validate_head_resharding_layout}: null when no KV-head re-sharding happens
     * (MLA or Mamba model, or {@code min(tp, H) == min(remoteTp, H)}) or every local attention
     * region supports it; else the {@code ERROR} message for the first region that does not.
     *
     * @param layoutOfLayer the local layer facts by layer name
     */
    public static String validateHeadReshardingLayout(TransferTopology topology, int remoteTpSize,
            List<TransferRegion> local, java.util.function.Function<String, LayerLayout> layoutOfLayer) {
        if (topology.mla() || topology.mamba()) {
            return null;
        }
        int h = topology.totalNumKvHeads();
        if (Math.min(topology.tpSize(), h) == Math.min(remoteTpSize, h)) {
            return null;
        }
        for (TransferRegion region : local) {
            LayerLayout layout = layoutOfLayer.apply(region.layerName());
            if (layout == null || !layout.attention()) {
                continue;
            }
            if (layout.paddedPage()) {
                return String.format(Locale.ROOT,
                        "Mooncake KV-head re-sharding is not supported for padded KV pages (layer %s).",
                        region.layerName());
            }
            if (layout.nvfp4()) {
                return "Mooncake KV-head re-sharding is not supported for NVFP4 KV cache.";
            }
        }
        return null;
    }

    /**
     * vLLM's {@code _validate_asymmetric_region_lengths}: null when every aligned pair's
     * {@code kvBlockLen}s fit the TP ratio, else the {@code ERROR} message.
     *
     * @param totalNumKvHeads the KV-head count for plain attention models, {@code <= 0} for
     *                        vLLM's {@code None} (MLA or Mamba models)
     */
    public static String validateAsymmetricRegionLengths(List<TransferRegion> local, List<TransferRegion> remote,
            int localTp, int remoteTp, boolean producerReplicated, int totalNumKvHeads) {
        if (local.size() != remote.size()) {
            return "Mooncake asymmetric TP requires matching KV region counts between producer and consumer.";
        }
        int lt = localTp;
        int rt = remoteTp;
        if (totalNumKvHeads > 0) {
            lt = Math.min(lt, totalNumKvHeads);
            rt = Math.min(rt, totalNumKvHeads);
        } else if (producerReplicated) {
            return null;
        }
        int r;
        try {
            r = TransferTopology.tpRatio(lt, rt);
        } catch (TransferPlanningException e) {
            return e.getMessage();
        }
        for (int i = 0; i < local.size(); i++) {
            long l = local.get(i).kvBlockLen();
            long rm = remote.get(i).kvBlockLen();
            if (r == 1 && l != rm) {
                return String.format(Locale.ROOT,
                        "Mooncake KV region length mismatch for homogeneous TP at region %d: local=%d, remote=%d.",
                        i, l, rm);
            }
            if (r > 1 && rm != l * r) {
                return String.format(Locale.ROOT,
                        "Mooncake destination KV region length does not match the producer TP ratio at region %d: "
                                + "local=%d, remote=%d, tp_ratio=%d.", i, l, rm, r);
            }
            if (r < 0 && l != rm * -r) {
                return String.format(Locale.ROOT,
                        "Mooncake source KV region length does not match the consumer TP ratio at region %d: "
                                + "local=%d, remote=%d, tp_ratio=%d.", i, l, rm, r);
            }
        }
        return null;
    }
}
