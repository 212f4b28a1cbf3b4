package io.mooncake4j.connector.scheduler;

import io.mooncake4j.connector.BlockIds;

/**
 * The blocks the embedder's KV-cache manager allocated for a request in this step, as passed to
 * {@link MooncakeConnectorScheduler#updateStateAfterAlloc} (the part of vLLM's
 * {@code KVCacheBlocks} the connector reads).
 */
@FunctionalInterface
public interface KvCacheBlocks {

    /**
     * vLLM's {@code get_unhashed_block_ids_all_groups()}: for every KV-cache group of the
     * configuration, in group order, the ids of this request's blocks that are not prefix-cache
     * hits (they have no block hash yet) — the blocks that will receive the external tokens. The
     * connector copies what it keeps; it never modifies the arrays.
     *
     * @return per KV-cache group, the ids of the request's blocks that are not prefix-cache hits
     */
    int[][] unhashedBlockIdsAllGroups();

    /**
     * {@return blocks whose unhashed ids per group are {@code perGroup} (used as given, not copied)}
     *
     * @param perGroup block ids per KV-cache group
     */
    static KvCacheBlocks ofUnhashed(int[]... perGroup) {
        return () -> perGroup;
    }

    /** {@return no blocks (zero groups)} */
    static KvCacheBlocks empty() {
        return () -> BlockIds.NONE;
    }
}
