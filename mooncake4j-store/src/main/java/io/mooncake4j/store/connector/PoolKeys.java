package io.mooncake4j.store.connector;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The object keys of vLLM's v1 {@code MooncakeStoreConnector} ({@code KeyMetadata}, {@code PoolKey},
 * {@code ChunkedTokenDatabase} in {@code .../mooncake/store/data.py}; the TP replication factor and
 * the lookup namespaces in {@code worker.py}): one key per block per KV-cache group,
 * {@code [cache_prefix@]<model basename>@tp_rank:<shard>@pcp<r>@dcp<r>@pp_rank:<r>@group:<g>@<hash hex>}.
 *
 * <p>The namespace (everything before the hash) is what keeps the values of another model, another
 * parallel layout or another KV group apart: a key of another namespace is another key, so it misses.
 *
 * @param cachePrefix the optional deployment namespace ({@code kv_connector_extra_config.cache_prefix}), "" for none
 * @param modelName   the model's basename ({@link #modelName(String)})
 * @param tpRank      the TP shard id: the rank divided by the group's {@link #replicationFactor replication factor}
 * @param pcpRank     the prefill context-parallel rank
 * @param dcpRank     the decode context-parallel rank
 * @param ppRank      the pipeline-parallel rank
 * @param groupId     the KV-cache group index
 */
public record PoolKeys(String cachePrefix, String modelName, int tpRank, int pcpRank, int dcpRank, int ppRank,
                       int groupId) {

    /** Validates; {@code cachePrefix} null means "". */
    public PoolKeys {
        cachePrefix = cachePrefix == null ? "" : cachePrefix;
        Objects.requireNonNull(modelName, "modelName");
        if (modelName.isEmpty()) {
            throw new IllegalArgumentException("model name must not be empty");
        }
        if (tpRank < 0 || pcpRank < 0 || dcpRank < 0 || ppRank < 0 || groupId < 0) {
            throw new IllegalArgumentException("ranks and group must be >= 0: " + tpRank + "/" + pcpRank + "/"
                    + dcpRank + "/" + ppRank + "/" + groupId);
        }
    }

    /**
     * Rank 0 of every dimension, group 0.
     *
     * @param cachePrefix the deployment namespace, "" or null for none
     * @param modelName   the model's basename
     * @return the namespace
     */
    public static PoolKeys of(String cachePrefix, String modelName) {
        return new PoolKeys(cachePrefix, modelName, 0, 0, 0, 0, 0);
    }

    /**
     * The model name vLLM keys by: the basename of {@code --model} ({@code model.rstrip("/").split("/")[-1]}).
     *
     * @param model {@code --model}: a path or a name
     * @return its basename
     */
    public static String modelName(String model) {
        String m = model;
        int end = m.length();
        while (end > 0 && m.charAt(end - 1) == '/') {
            end--;
        }
        m = m.substring(0, end);
        return m.substring(m.lastIndexOf('/') + 1);
    }

    /**
     * The same namespace for another group.
     *
     * @param group the KV-cache group index
     * @return the namespace
     */
    public PoolKeys withGroup(int group) {
        return new PoolKeys(cachePrefix, modelName, tpRank, pcpRank, dcpRank, ppRank, group);
    }

    /**
     * The same namespace at other ranks.
     *
     * @param tp  the TP shard id
     * @param pcp the PCP rank
     * @param dcp the DCP rank
     * @param pp  the PP rank
     * @return the namespace
     */
    public PoolKeys withRanks(int tp, int pcp, int dcp, int pp) {
        return new PoolKeys(cachePrefix, modelName, tp, pcp, dcp, pp, groupId);
    }

    /** {@return the namespace: {@code PoolKey.build_prefix}} */
    public String prefix() {
        return (cachePrefix.isEmpty() ? "" : cachePrefix + "@") + modelName + "@tp_rank:" + tpRank + "@pcp" + pcpRank
                + "@dcp" + dcpRank + "@pp_rank:" + ppRank + "@group:" + groupId;
    }

    /**
     * {@return the key of the block whose hash is {@code hash}}
     *
     * @param hash the block hash
     */
    public String key(byte[] hash) {
        return prefix() + "@" + BlockHasher.hex(hash);
    }

    /**
     * {@return Mooncake's {@code group_ids} entry vLLM puts with the block (its lifecycle unit)}
     *
     * @param hash the block hash
     */
    public String lifecycleGroup(byte[] hash) {
        return "vllm-mooncake-store:" + (cachePrefix.isEmpty() ? "" : cachePrefix + "@") + modelName + "@"
                + BlockHasher.hex(hash);
    }

    /** What a KV-cache group holds, for {@link #replicationFactor}. */
    public enum GroupKind {
        /** Attention with KV heads sharded over TP (MHA/GQA). */
        ATTENTION,
        /** MLA: the latent is the same on every TP rank. */
        MLA,
        /** Mamba (or any rank-specific state). */
        MAMBA
    }

    /**
     * How many TP ranks hold byte-identical KV of a group ({@code _spec_tp_replication_factor}):
     * 1 with DCP or Mamba state, {@code tpSize} for MLA, {@code max(1, tpSize / numKvHeads)} otherwise.
     *
     * @param tpSize     the TP size
     * @param numKvHeads the model's KV heads
     * @param kind       what the group holds
     * @param dcpSize    the DCP size
     * @return the factor
     */
    public static int replicationFactor(int tpSize, int numKvHeads, GroupKind kind, int dcpSize) {
        if (tpSize <= 0 || numKvHeads <= 0 || dcpSize <= 0) {
            throw new IllegalArgumentException("sizes must be positive");
        }
        if (dcpSize > 1 || kind == GroupKind.MAMBA) {
            return 1;
        }
        if (kind == GroupKind.MLA) {
            return tpSize;
        }
        return Math.max(1, tpSize / numKvHeads);
    }

    /**
     * Every namespace a lookup must find a block in ({@code _init_lookup_key_prefixes}): one per
     * distinct TP shard (or, with DCP, per TP rank), PCP and PP rank, in vLLM's order.
     *
     * @param tpSize  the TP size
     * @param pcpSize the PCP size
     * @param ppSize  the PP size
     * @param dcpSize the DCP size
     * @param factor  the group's replication factor
     * @return the namespaces
     */
    public List<PoolKeys> lookupNamespaces(int tpSize, int pcpSize, int ppSize, int dcpSize, int factor) {
        List<PoolKeys> out = new ArrayList<>();
        for (int pcp = 0; pcp < pcpSize; pcp++) {
            int shards = dcpSize > 1 ? tpSize : tpSize / factor;
            for (int tp = 0; tp < shards; tp++) {
                for (int pp = 0; pp < ppSize; pp++) {
                    out.add(withRanks(tp, pcp, dcpSize > 1 ? tp % dcpSize : 0, pp));
                }
            }
        }
        return out;
    }

    /**
     * Whether a rank stores block {@code chunkId} of group {@code group}: replicated ranks stripe the puts.
     *
     * @param chunkId the block index in the request
     * @param tpRank  the rank's TP rank
     * @param group   the group index
     * @param putStep the group's replication factor
     * @return whether this rank puts it
     */
    public static boolean storesChunk(int chunkId, int tpRank, int group, int putStep) {
        return chunkId % putStep == (tpRank + group) % putStep;
    }

    /**
     * A block's token range and the index of the hash that keys it ({@code process_tokens}).
     *
     * @param chunkId   the block index in the request
     * @param start     first token
     * @param end       one past the last token
     * @param hashIndex index into the request's hash list
     */
    public record Chunk(int chunkId, int start, int end, int hashIndex) {}

    /**
     * The blocks of {@code tokenLen} tokens after the first {@code maskNum} that rank stripe
     * {@code putStepRank} of {@code putStep} handles ({@code ChunkedTokenDatabase.process_tokens} with
     * hashes at block granularity).
     *
     * @param tokenLen    tokens, a multiple of {@code blockSize}
     * @param numHashes   the request's block hashes
     * @param blockSize   tokens per block
     * @param maskNum     tokens to skip from the start
     * @param putStep     the stripe width
     * @param putStepRank this rank's stripe
     * @return the blocks, in order
     */
    public static List<Chunk> chunks(int tokenLen, int numHashes, int blockSize, int maskNum, int putStep,
            int putStepRank) {
        if (putStep <= 0 || blockSize <= 0 || tokenLen % blockSize != 0 || tokenLen / blockSize > numHashes) {
            throw new IllegalArgumentException("bad chunking: " + tokenLen + " tokens, " + numHashes + " hashes, block "
                    + blockSize + ", step " + putStep);
        }
        List<Chunk> out = new ArrayList<>();
        if (numHashes == 0) {
            return out;
        }
        int startChunk = Math.max(0, (maskNum + blockSize - 1) / blockSize);
        int maxChunks = (tokenLen + blockSize - 1) / blockSize;
        for (int c = startChunk; c < maxChunks; c++) {
            if (c % putStep != putStepRank) {
                continue;
            }
            int start = c * blockSize;
            int end = Math.min(start + blockSize, tokenLen);
            out.add(new Chunk(c, start, end, end / blockSize - 1));
        }
        return out;
    }
}
