package io.mooncake4j.connector.wire;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's {@code MooncakeXferMetadata}: what D sends to one P worker over the side channel
 * ("push these transfers into these blocks of mine, at these addresses"). Fields 1–12 of the
 * target version, in declaration order; encode and decode with {@link MooncakeXferMetadataCodec}.
 *
 * <p>Arrays are owned by the record and must not be modified after construction (they are not
 * copied, so planning code reads them without boxing). {@code equals}/{@code hashCode} compare
 * array contents.
 *
 * @param remoteHostname         D's IP; with {@code remotePort} it names D's transfer-engine session
 * @param remotePort             D's Mooncake RPC port (not a ZMQ port)
 * @param remoteTpSize           D's TP size
 * @param remoteTpRank           D's TP rank
 * @param reqBlocks              D request id → (transfer id, destination block ids per KV group), in D's order
 * @param kvCachesBaseAddr       D's region base addresses (registration order); unsigned 64-bit
 * @param blockLens              D's physical per-block stride in bytes, per region
 * @param kvBlockLens            D's bytes to transfer per block, per region
 * @param registeredLayerNames   layer name per region (default empty)
 * @param registeredLayerIndices layer index per region (default empty)
 * @param registeredGroupIndices KV transfer-group index per region (default empty)
 * @param remotePpSize           D's PP size (default 1)
 * @param kvLayout               mooncake4j's extension {@code mooncake4j_kv_layout}: what D's KV blocks mean (model,
 *                               dtype, shapes, tokenizer, block size), or null (default; vLLM's D sends none). Written
 *                               last and only when set; vLLM's P decodes with msgspec, which ignores unknown keys, so
 *                               a vLLM P is not affected; a mooncake4j P refuses a pull whose layout differs from its own
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py: MooncakeXferMetadata</a>
 */
public record MooncakeXferMetadata(
        String remoteHostname,
        int remotePort,
        int remoteTpSize,
        int remoteTpRank,
        Map<String, ReqBlocks> reqBlocks,
        long[] kvCachesBaseAddr,
        long[] blockLens,
        long[] kvBlockLens,
        List<String> registeredLayerNames,
        int[] registeredLayerIndices,
        int[] registeredGroupIndices,
        int remotePpSize,
        String kvLayout) {

    /** vLLM's fields 1–12, without a KV layout. */
    public MooncakeXferMetadata(String remoteHostname, int remotePort, int remoteTpSize, int remoteTpRank,
            Map<String, ReqBlocks> reqBlocks, long[] kvCachesBaseAddr, long[] blockLens, long[] kvBlockLens,
            List<String> registeredLayerNames, int[] registeredLayerIndices, int[] registeredGroupIndices,
            int remotePpSize) {
        this(remoteHostname, remotePort, remoteTpSize, remoteTpRank, reqBlocks, kvCachesBaseAddr, blockLens,
                kvBlockLens, registeredLayerNames, registeredLayerIndices, registeredGroupIndices, remotePpSize, null);
    }

    /** Default of {@code remote_pp_size}. */
    public static final int DEFAULT_REMOTE_PP_SIZE = 1;

    public MooncakeXferMetadata {
        Objects.requireNonNull(remoteHostname, "remoteHostname");
        reqBlocks = Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(reqBlocks, "reqBlocks")));
        reqBlocks.forEach((k, v) -> {
            Objects.requireNonNull(k, "reqBlocks key");
            Objects.requireNonNull(v, "reqBlocks value");
        });
        Objects.requireNonNull(kvCachesBaseAddr, "kvCachesBaseAddr");
        Objects.requireNonNull(blockLens, "blockLens");
        Objects.requireNonNull(kvBlockLens, "kvBlockLens");
        registeredLayerNames = List.copyOf(Objects.requireNonNull(registeredLayerNames, "registeredLayerNames"));
        Objects.requireNonNull(registeredLayerIndices, "registeredLayerIndices");
        Objects.requireNonNull(registeredGroupIndices, "registeredGroupIndices");
    }

    /**
     * Metadata with only the required fields (1–8); the optional ones take their defaults.
     */
    public static MooncakeXferMetadata of(String remoteHostname, int remotePort, int remoteTpSize, int remoteTpRank,
            Map<String, ReqBlocks> reqBlocks, long[] kvCachesBaseAddr, long[] blockLens, long[] kvBlockLens) {
        return new MooncakeXferMetadata(remoteHostname, remotePort, remoteTpSize, remoteTpRank, reqBlocks,
                kvCachesBaseAddr, blockLens, kvBlockLens, List.of(), new int[0], new int[0], DEFAULT_REMOTE_PP_SIZE);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MooncakeXferMetadata m
                && remoteHostname.equals(m.remoteHostname)
                && remotePort == m.remotePort
                && remoteTpSize == m.remoteTpSize
                && remoteTpRank == m.remoteTpRank
                && reqBlocks.equals(m.reqBlocks)
                && Arrays.equals(kvCachesBaseAddr, m.kvCachesBaseAddr)
                && Arrays.equals(blockLens, m.blockLens)
                && Arrays.equals(kvBlockLens, m.kvBlockLens)
                && registeredLayerNames.equals(m.registeredLayerNames)
                && Arrays.equals(registeredLayerIndices, m.registeredLayerIndices)
                && Arrays.equals(registeredGroupIndices, m.registeredGroupIndices)
                && remotePpSize == m.remotePpSize
                && Objects.equals(kvLayout, m.kvLayout);
    }

    @Override
    public int hashCode() {
        int h = Objects.hash(remoteHostname, remotePort, remoteTpSize, remoteTpRank, reqBlocks,
                registeredLayerNames, remotePpSize, kvLayout);
        h = 31 * h + Arrays.hashCode(kvCachesBaseAddr);
        h = 31 * h + Arrays.hashCode(blockLens);
        h = 31 * h + Arrays.hashCode(kvBlockLens);
        h = 31 * h + Arrays.hashCode(registeredLayerIndices);
        return 31 * h + Arrays.hashCode(registeredGroupIndices);
    }

    @Override
    public String toString() {
        return "MooncakeXferMetadata[remoteHostname=" + remoteHostname + ", remotePort=" + remotePort
                + ", remoteTpSize=" + remoteTpSize + ", remoteTpRank=" + remoteTpRank + ", reqBlocks=" + reqBlocks
                + ", kvCachesBaseAddr=" + Arrays.toString(kvCachesBaseAddr) + ", blockLens=" + Arrays.toString(blockLens)
                + ", kvBlockLens=" + Arrays.toString(kvBlockLens) + ", registeredLayerNames=" + registeredLayerNames
                + ", registeredLayerIndices=" + Arrays.toString(registeredLayerIndices)
                + ", registeredGroupIndices=" + Arrays.toString(registeredGroupIndices)
                + ", remotePpSize=" + remotePpSize + (kvLayout == null ? "" : ", kvLayout=" + kvLayout) + "]";
    }

    /**
     * One {@code req_blocks} value: vLLM's tuple {@code (transfer_id, block_ids_per_group)}.
     * The arrays are owned by the record and must not be modified.
     *
     * @param transferId the rendezvous key shared by P and D
     * @param blockIds   D's destination block ids, one array per KV-cache group
     */
    public record ReqBlocks(String transferId, long[][] blockIds) {

        public ReqBlocks {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(blockIds, "blockIds");
            for (long[] g : blockIds) {
                Objects.requireNonNull(g, "blockIds group");
            }
        }

        /** Number of KV groups. */
        public int numGroups() {
            return blockIds.length;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ReqBlocks r && transferId.equals(r.transferId) && Arrays.deepEquals(blockIds, r.blockIds);
        }

        @Override
        public int hashCode() {
            return 31 * transferId.hashCode() + Arrays.deepHashCode(blockIds);
        }

        @Override
        public String toString() {
            return "(" + transferId + ", " + Arrays.deepToString(blockIds) + ")";
        }
    }
}
