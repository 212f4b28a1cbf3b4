package io.mooncake4j.connector;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * What the scheduler tells its workers in one step (vLLM's {@code MooncakeConnectorMetadata},
 * spec §3.4):
 * <ul>
 *   <li>{@link #reqsToRecv()}: D pulls, grouped by remote (P) engine id, then by D request id;</li>
 *   <li>{@link #reqsToSend()}: P sends by P request id: the transfer id and the source block ids
 *       per group ({@code []} when first announced at allocation, the real blocks when the request
 *       finished);</li>
 *   <li>{@link #reqsNotProcessed()}: transfer ids of P requests that ended without a transfer
 *       (aborted, stopped), which the worker must forget.</li>
 * </ul>
 * Iteration orders are insertion orders, as for Python dicts and vLLM's step.
 *
 * <p>Built by the scheduler thread with {@link #addNewReq}, then handed to the worker (the hand-off
 * must be a happens-before edge, e.g. a method call or a queue); the worker only reads it, apart
 * from the mutable bookkeeping of {@link PullReqMeta}. Not thread-safe. The accessors return
 * unmodifiable views.
 *
 * <p>In vLLM this object crosses the executor IPC (pickled); in mooncake4j it is an in-process DTO.
 */
public final class MooncakeConnectorMetadata {

    /**
     * One P send entry: vLLM's {@code (transfer_id, local_block_ids)} tuple. The block ids are
     * copied at construction and returned without copying (read-only). Equality is by value.
     *
     * @param transferId    the rendezvous key
     * @param localBlockIds P's source block ids per transfer group; {@code []} to announce the
     *                      transfer before the blocks are known
     */
    public record ReqToSend(String transferId, int[][] localBlockIds) {

        /** Copies the block ids. */
        public ReqToSend {
            Objects.requireNonNull(transferId, "transferId");
            localBlockIds = BlockIds.copyOf(localBlockIds);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ReqToSend r && transferId.equals(r.transferId)
                    && Arrays.deepEquals(localBlockIds, r.localBlockIds);
        }

        @Override
        public int hashCode() {
            return 31 * transferId.hashCode() + Arrays.deepHashCode(localBlockIds);
        }

        @Override
        public String toString() {
            return "(" + transferId + ", " + BlockIds.toString(localBlockIds) + ")";
        }
    }

    /**
     * A P prefill chunk whose layers the forward pass of this step saves (layer-wise push, a
     * mooncake4j extension that never crosses the wire): the blocks of the request's prompt that
     * are complete once this step's forward pass has written them and were not in an earlier chunk.
     *
     * @param transferId  the request's rendezvous key
     * @param blockIds    P's block ids per transfer group: prompt blocks {@code [firstBlock,
     *                    firstBlock + blockIds[g].length)}
     * @param firstBlock  index in the prompt's block list of {@code blockIds[g][0]}
     * @param totalBlocks blocks of the whole prompt (per group), to pair P's blocks with D's tail
     * @param last        whether this chunk ends the prompt
     */
    public record LayerwiseChunk(String transferId, int[][] blockIds, int firstBlock, int totalBlocks, boolean last) {

        /**
         * Copies the block ids and checks the positions.
         *
         * @throws IllegalArgumentException when a position is negative
         */
        public LayerwiseChunk {
            Objects.requireNonNull(transferId, "transferId");
            blockIds = BlockIds.copyOf(blockIds);
            if (firstBlock < 0 || totalBlocks < 0) {
                throw new IllegalArgumentException("firstBlock and totalBlocks must be >= 0, got " + firstBlock
                        + ", " + totalBlocks);
            }
            for (int[] g : blockIds) {
                if (firstBlock + g.length > totalBlocks) {
                    throw new IllegalArgumentException("chunk blocks [" + firstBlock + ", " + (firstBlock + g.length)
                            + ") exceed the prompt's " + totalBlocks + " blocks");
                }
            }
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof LayerwiseChunk c && transferId.equals(c.transferId) && firstBlock == c.firstBlock
                    && totalBlocks == c.totalBlocks && last == c.last && Arrays.deepEquals(blockIds, c.blockIds);
        }

        @Override
        public int hashCode() {
            return Objects.hash(transferId, firstBlock, totalBlocks, last) * 31 + Arrays.deepHashCode(blockIds);
        }

        @Override
        public String toString() {
            return "(" + transferId + ", " + BlockIds.toString(blockIds) + ", first=" + firstBlock + ", total="
                    + totalBlocks + (last ? ", last)" : ")");
        }
    }

    private final Map<String, Map<String, PullReqMeta>> reqsToRecv = new LinkedHashMap<>();
    private final Map<String, LayerwiseChunk> layerwiseChunks = new LinkedHashMap<>();
    private final Map<String, ReqToSend> reqsToSend = new LinkedHashMap<>();
    private Set<String> reqsNotProcessed = new LinkedHashSet<>();

    /** An empty metadata object. */
    public MooncakeConnectorMetadata() {}

    /**
     * vLLM's {@code add_new_req}. Reads {@code transfer_id} from {@code kvTransferParams}; when
     * {@code loadRemoteCache} also {@code remote_engine_id} and {@code remote_bootstrap_addr},
     * and files a {@link PullReqMeta} under {@code reqsToRecv[remote_engine_id][requestId]};
     * otherwise files {@code reqsToSend[requestId] = (transfer_id, localBlockIds)}. A later entry
     * for the same request id replaces the earlier one.
     *
     * @param requestId        the request's id
     * @param kvTransferParams the request's {@code kv_transfer_params}
     * @param loadRemoteCache  whether D loads this request from P
     * @param localBlockIds block ids per transfer group (copied)
     * @throws ConnectorException when a required key is absent or null (vLLM: {@code KeyError})
     */
    public void addNewReq(String requestId, int[][] localBlockIds, Map<String, Object> kvTransferParams,
            boolean loadRemoteCache) {
        Objects.requireNonNull(requestId, "requestId");
        Objects.requireNonNull(kvTransferParams, "kvTransferParams");
        String transferId = required(requestId, kvTransferParams, KvTransferParams.TRANSFER_ID);
        if (loadRemoteCache) {
            String remoteEngineId = required(requestId, kvTransferParams, KvTransferParams.REMOTE_ENGINE_ID);
            String bootstrapAddr = required(requestId, kvTransferParams, KvTransferParams.REMOTE_BOOTSTRAP_ADDR);
            reqsToRecv.computeIfAbsent(remoteEngineId, k -> new LinkedHashMap<>())
                    .put(requestId, new PullReqMeta(requestId, transferId, localBlockIds, remoteEngineId,
                            bootstrapAddr));
        } else {
            reqsToSend.put(requestId, new ReqToSend(transferId, localBlockIds));
        }
    }

    private static String required(String requestId, Map<String, Object> params, String key) {
        String v = KvTransferParams.stringValue(params.get(key));
        if (v == null) {
            throw new ConnectorException("kv_transfer_params of request " + requestId + " lack '" + key
                    + "': " + params);
        }
        return v;
    }

    /** {@return D pulls: remote engine id → (D request id → pull)} */
    public Map<String, Map<String, PullReqMeta>> reqsToRecv() {
        return Collections.unmodifiableMap(reqsToRecv);
    }

    /** {@return P sends: P request id → (transfer id, block ids per group)} */
    public Map<String, ReqToSend> reqsToSend() {
        return Collections.unmodifiableMap(reqsToSend);
    }

    /** {@return transfer ids of P requests that finished without a transfer} */
    public Set<String> reqsNotProcessed() {
        return Collections.unmodifiableSet(reqsNotProcessed);
    }

    /**
     * Replaces {@link #reqsNotProcessed()} with a copy of {@code transferIds}.
     *
     * @param transferIds the transfer ids the scheduler did not process
     */
    public void setReqsNotProcessed(Set<String> transferIds) {
        reqsNotProcessed = new LinkedHashSet<>(transferIds);
    }

    /**
     * Files the prefill chunk of P request {@code requestId} that this step computes (layer-wise push).
     *
     * @param requestId the request's id
     * @param chunk     the blocks to push and where they go
     */
    public void addLayerwiseChunk(String requestId, LayerwiseChunk chunk) {
        layerwiseChunks.put(Objects.requireNonNull(requestId, "requestId"), Objects.requireNonNull(chunk, "chunk"));
    }

    /** {@return layer-wise push: P request id → the prefill chunk this step's forward pass saves} */
    public Map<String, LayerwiseChunk> layerwiseChunks() {
        return Collections.unmodifiableMap(layerwiseChunks);
    }

    /** {@return whether nothing is to be received, sent, saved or forgotten} */
    public boolean isEmpty() {
        return reqsToRecv.isEmpty() && reqsToSend.isEmpty() && reqsNotProcessed.isEmpty()
                && layerwiseChunks.isEmpty();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MooncakeConnectorMetadata m && reqsToRecv.equals(m.reqsToRecv)
                && reqsToSend.equals(m.reqsToSend) && reqsNotProcessed.equals(m.reqsNotProcessed)
                && layerwiseChunks.equals(m.layerwiseChunks);
    }

    @Override
    public int hashCode() {
        return Objects.hash(reqsToRecv, reqsToSend, reqsNotProcessed, layerwiseChunks);
    }

    @Override
    public String toString() {
        return "MooncakeConnectorMetadata[reqsToRecv=" + reqsToRecv + ", reqsToSend=" + reqsToSend
                + ", reqsNotProcessed=" + reqsNotProcessed
                + (layerwiseChunks.isEmpty() ? "" : ", layerwiseChunks=" + layerwiseChunks) + "]";
    }
}
