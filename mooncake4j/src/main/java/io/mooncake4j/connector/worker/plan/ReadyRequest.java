package io.mooncake4j.connector.worker.plan;



/**
 * One ready request of a wave as the planner sees it: D's request id, P's source block ids
 * per KV group ({@code SendBlockMeta.local_block_ids}) and D's destination block ids per group
 * (from {@code req_blocks}). The arrays are read, never modified or kept.
 */
public interface ReadyRequest {

    String dReqId();

    int[][] localBlockIds();

    int[][] remoteBlockIds();

    /** A plain holder. */
    static ReadyRequest of(String dReqId, int[][] localBlockIds, int[][] remoteBlockIds) {
        return new Simple(dReqId, localBlockIds, remoteBlockIds);
    }

    /** Record implementation of {@link ReadyRequest}. */
    record Simple(String dReqId, int[][] localBlockIds, int[][] remoteBlockIds) implements ReadyRequest {
    }
}
