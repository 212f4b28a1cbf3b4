package io.mooncake4j.connector.scheduler;

import io.mooncake4j.connector.BlockIds;
import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The scheduler side of the Mooncake connector (vLLM's {@code MooncakeConnectorScheduler}, spec
 * §5): it decides which requests load KV from a remote P engine (D side) or must keep their blocks
 * until their KV has been pushed to a D engine (P side), and tells the workers each step through
 * {@link #buildConnectorMeta()}.
 *
 * <p>The embedder's scheduler calls, per step and in this order: {@link #getNumNewMatchedTokens}
 * for each waiting request, {@link #updateStateAfterAlloc} after allocating its blocks,
 * {@link #requestFinished} for each request that finished (or was aborted), and
 * {@link #buildConnectorMeta()} once, handing the result to the workers' {@code startLoadKv}.
 * Blocks of a request for which {@code requestFinished} answered {@code delayFreeBlocks} are
 * freed only when a worker reports the request id in {@code finished_sending}.
 *
 * <p><b>Threading:</b> not thread-safe, by design: every method must be called from the one
 * scheduler thread of the embedder, as in vLLM. It does no I/O and never blocks.
 *
 * <p>Not implemented: the P-side Mamba/GDN prompt truncation ({@code on_new_request}, spec §5.2)
 * and everything marked [LATER] (prefix replay). The D-side N−1 token count of §5.2 is applied
 * when the KV-cache configuration has Mamba layers, as in vLLM.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py,
 *      MooncakeConnectorScheduler</a>
 */
public final class MooncakeConnectorScheduler {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeConnectorScheduler.class);

    /**
     * Switches of the scheduler.
     *
     * @param disableHybridKvCacheManager vLLM's {@code scheduler_config.disable_hybrid_kv_cache_manager}:
     *                                    when true, sliding-window clipping never applies
     * @param transferIdCollisionGuard    the optional transfer-id collision guard of spec §16.1
     *                                    (not in the reference connector; default off)
     */
    public record Options(boolean disableHybridKvCacheManager, boolean transferIdCollisionGuard) {

        /** {@return vLLM's defaults: hybrid KV-cache manager enabled, no collision guard} */
        public static Options defaults() {
            return new Options(false, false);
        }

        /**
         * {@return these options with vLLM's {@code disable_hybrid_kv_cache_manager} set to {@code v}}
         *
         * @param v whether the hybrid KV-cache manager is disabled
         */
        public Options withDisableHybridKvCacheManager(boolean v) {
            return new Options(v, transferIdCollisionGuard);
        }

        /**
         * {@return these options with the transfer-id collision guard on or off}
         *
         * @param v whether the guard is on
         */
        public Options withTransferIdCollisionGuard(boolean v) {
            return new Options(disableHybridKvCacheManager, v);
        }
    }

    /** A request waiting to be shipped in the next metadata, with its block ids per group. */
    private record Pending(Request request, int[][] blockIds, boolean carriesBlocks) {}

    private final String engineId;
    private final KvRole kvRole;
    private final boolean isKvProducer;
    private final boolean isKvConsumer;
    private final int blockSize;
    private final KvCacheConfig kvCacheConfig;
    private final Options options;
    private final boolean hmaRequired;
    private final boolean hasMamba;
    private final int[] blocksPerSw;

    private final boolean layerwise;
    /** Layer-wise push: P request id → index of its first prompt block not yet in a chunk. */
    private final Map<String, Integer> layerwiseNextBlock = new HashMap<>();
    private Map<String, MooncakeConnectorMetadata.LayerwiseChunk> layerwiseChunks = new LinkedHashMap<>();
    private Map<String, Pending> reqsNeedRecv = new LinkedHashMap<>();
    private Map<String, Pending> reqsNeedSend = new LinkedHashMap<>();
    private Set<String> reqsNotProcessed = new LinkedHashSet<>();
    /** Collision guard only: transfer id → the P request id that owns it. */
    private final Map<String, String> activeTransferIds = new HashMap<>();
    /** Collision guard only: transfer ids in {@code reqsNotProcessed} → the request that owned them. */
    private Map<String, String> abortedOwners = new HashMap<>();

    /**
     * A scheduler with {@link Options#defaults()}.
     *
     * @param config        the connector configuration of this rank
     * @param kvCacheConfig the engine's KV-cache groups (vLLM's KV cache config)
     * @param blockSize     the scheduler's block size in tokens
     */
    public MooncakeConnectorScheduler(MooncakeConnectorConfig config, KvCacheConfig kvCacheConfig, int blockSize) {
        this(config, kvCacheConfig, blockSize, Options.defaults());
    }

    /**
     * A scheduler with {@code options}.
     *
     * @param config        the connector configuration; its role and engine id are used
     * @param kvCacheConfig the KV-cache groups of this engine; every group is a transfer group, and
     *                      its index is the group index of every per-group block-id list
     * @param blockSize     the scheduler's block size in tokens (vLLM's {@code cache_config.block_size})
     * @param options       switches
     */
    public MooncakeConnectorScheduler(MooncakeConnectorConfig config, KvCacheConfig kvCacheConfig, int blockSize,
            Options options) {
        Objects.requireNonNull(config, "config");
        this.kvCacheConfig = Objects.requireNonNull(kvCacheConfig, "kv_cache_config is required for SCHEDULER role");
        this.options = Objects.requireNonNull(options, "options");
        if (blockSize <= 0) {
            throw new ConnectorException("block_size must be positive, got " + blockSize);
        }
        this.engineId = config.engineId();
        this.kvRole = config.kvRole();
        this.isKvProducer = kvRole.isProducer();
        this.isKvConsumer = kvRole.isConsumer();
        this.blockSize = blockSize;
        List<KvCacheGroup> groups = kvCacheConfig.groups();
        this.hmaRequired = !options.disableHybridKvCacheManager() && kvCacheConfig.hasNonFullAttentionGroup();
        this.hasMamba = groups.stream().anyMatch(g -> g.spec().kind() == KvCacheSpec.Kind.MAMBA
                || g.layerSpecs().values().stream().anyMatch(s -> s.kind() == KvCacheSpec.Kind.MAMBA));
        this.blocksPerSw = new int[groups.size()];
        for (int i = 0; i < groups.size(); i++) {
            KvCacheSpec spec = groups.get(i).spec();
            if (spec.kind() == KvCacheSpec.Kind.SLIDING_WINDOW) {
                // +1 conservatively for the block that straddles the window boundary
                blocksPerSw[i] = ceilDiv(spec.slidingWindow(), spec.blockSize()) + 1;
            }
        }
        boolean lw = config.layerwisePush() && isKvProducer;
        if (lw && (hmaRequired || hasMamba)) {
            LOG.warn("layerwise_push is on but the KV cache has sliding-window or Mamba groups; P pushes whole "
                    + "requests after they finish (layer-wise push needs full-attention groups only)");
            lw = false;
        }
        this.layerwise = lw;
        LOG.info("Initializing Mooncake Transfer Engine Scheduler {} (role {}, {} KV group(s), hma_required={}, "
                + "collision_guard={}, layerwise_push={})", engineId, kvRole.wireName(), groups.size(), hmaRequired,
                options.transferIdCollisionGuard(), layerwise);
    }

    private static int ceilDiv(int a, int b) {
        return -Math.floorDiv(-a, b);
    }

    /**
     * vLLM's {@code get_num_new_matched_tokens}: how many tokens beyond the {@code numComputedTokens}
     * local prefix-cache hit will be loaded from outside. A D request with {@code do_remote_prefill}
     * answers {@code (prompt tokens − numComputedTokens, true)} when positive — the KV arrives
     * asynchronously; every other request answers {@code (0, false)}. Side-effect free.
     *
     * @param request           the request (the embedder's view of it)
     * @param numComputedTokens tokens already computed locally (a prefix-cache hit)
     * @return the external token count and whether they load asynchronously
     * @throws ConnectorException when a {@code do_remote_prefill} request reaches a {@code kv_producer}
     */
    public MatchedTokens getNumNewMatchedTokens(Request request, int numComputedTokens) {
        Map<String, Object> raw = request.kvTransferParams();
        if (LOG.isDebugEnabled()) {
            LOG.debug("MooncakeConnector get_num_new_matched_tokens: request {}, num_computed_tokens={}, "
                    + "kv_transfer_params={}", request.requestId(), numComputedTokens, raw);
        }
        if (KvTransferParams.isNullOrEmpty(raw)) {
            return MatchedTokens.NONE;
        }
        KvTransferParams params = KvTransferParams.wrap(raw);
        if (params.doRemotePrefill()) {
            requireNotProducer(request);
            int count = remotePrefillTokenCount(request.numPromptTokens()) - numComputedTokens;
            if (count > 0) {
                return new MatchedTokens(count, true);
            }
        }
        return MatchedTokens.NONE;
    }

    /** vLLM's {@code _get_remote_prefill_token_count}: P computed N−1 tokens when the model has Mamba layers. */
    private int remotePrefillTokenCount(int numPromptTokens) {
        return hasMamba && numPromptTokens > 1 ? numPromptTokens - 1 : numPromptTokens;
    }

    /**
     * vLLM's {@code update_state_after_alloc}, called after the embedder allocated the request's
     * blocks for this step.
     * <ul>
     *   <li>D ({@code do_remote_prefill}): with {@code remote_engine_id}, {@code remote_bootstrap_addr}
     *       and {@code transfer_id} present, records a pull into the request's unhashed blocks
     *       (none when {@code numExternalTokens == 0}), sliding-window clipped; otherwise logs
     *       {@code "Got invalid KVTransferParams: …"}. Either way sets {@code do_remote_prefill}
     *       to {@code false}: one transfer per request.</li>
     *   <li>P ({@code do_remote_decode}): with a {@code transfer_id}, records an announcement
     *       {@code (transfer_id, [])} so the worker can wait for the blocks; otherwise logs
     *       {@code "Missing transfer_id in kv_transfer_params from router!"}. With the collision
     *       guard on, a transfer id already owned by another live request is refused and the
     *       request's {@code do_remote_decode} is set to {@code false}.</li>
     * </ul>
     *
     * @param request the request (the embedder's view of it)
     * @param blocks            the blocks allocated to the request; may be {@code null} when
     *                          {@code numExternalTokens == 0}
     * @param numExternalTokens the count returned by {@link #getNumNewMatchedTokens} for this request
     * @throws ConnectorException when a {@code do_remote_prefill} request reaches a {@code kv_producer},
     *                            or a {@code do_remote_decode} request a {@code kv_consumer}
     */
    public void updateStateAfterAlloc(Request request, KvCacheBlocks blocks, int numExternalTokens) {
        Map<String, Object> raw = request.kvTransferParams();
        if (LOG.isDebugEnabled()) {
            LOG.debug("MooncakeConnector update_state_after_alloc: request {}, num_external_tokens={}, "
                    + "kv_transfer_params={}", request.requestId(), numExternalTokens, raw);
        }
        if (KvTransferParams.isNullOrEmpty(raw)) {
            return;
        }
        KvTransferParams params = KvTransferParams.wrap(raw);
        if (params.doRemotePrefill()) {
            requireNotProducer(request);
            if (hasPullKeys(params)) {
                int[][] unhashed = BlockIds.NONE;
                if (numExternalTokens > 0) {
                    Objects.requireNonNull(blocks, "blocks are required when num_external_tokens > 0");
                    unhashed = blocks.unhashedBlockIdsAllGroups();
                }
                int[][] local = getSwClippedBlocks(unhashed);
                reqsNeedRecv.put(request.requestId(), new Pending(request, local, local.length > 0));
            } else {
                LOG.warn("Got invalid KVTransferParams: {}. This request will not utilize KVTransfer", raw);
            }
            // Only trigger one KV transfer per request.
            params.setDoRemotePrefill(false);
        } else if (params.doRemoteDecode()) {
            requireNotConsumer(request);
            if (!params.hasTransferId()) {
                LOG.warn("Missing transfer_id in kv_transfer_params from router!");
                return;
            }
            if (options.transferIdCollisionGuard()) {
                String tid = params.transferId();
                String owner = activeTransferIds.putIfAbsent(tid, request.requestId());
                if (owner != null && !owner.equals(request.requestId())) {
                    LOG.warn("transfer_id {} of request {} is already in use by request {}; request {} will not "
                            + "send its KV", tid, request.requestId(), owner, request.requestId());
                    params.setDoRemoteDecode(false);
                    return;
                }
            }
            // An empty list makes the worker create the transfer's ready event.
            reqsNeedSend.put(request.requestId(), new Pending(request, BlockIds.NONE, false));
        }
    }

    /**
     * Layer-wise push (mooncake4j; a no-op unless {@code layerwise_push} is on and this engine
     * produces KV): the embedder schedules prompt positions {@code [computedBefore, computedAfter)}
     * of {@code request} for this step's forward pass. For a {@code do_remote_decode} request with a
     * transfer id, files in the next {@link #buildConnectorMeta()} the chunk of prompt blocks that is
     * complete after this step and was not in an earlier chunk (the first chunk includes the blocks of
     * a local prefix-cache hit; the last one the partial tail block), so that the worker's
     * {@code saveKvLayer} can push each layer of them as soon as it is written.
     *
     * @param request        the request (the embedder's view of it)
     * @param computedBefore tokens computed before this step
     * @param computedAfter  tokens computed after this step
     * @param blockIds the request's prompt blocks per KV-cache group (at least the blocks up to
     *                 {@code computedAfter})
     */
    public void recordPrefillChunk(Request request, int[][] blockIds, int computedBefore, int computedAfter) {
        Objects.requireNonNull(blockIds, "blockIds");
        if (!layerwise) {
            return;
        }
        Map<String, Object> raw = request.kvTransferParams();
        if (KvTransferParams.isNullOrEmpty(raw)) {
            return;
        }
        KvTransferParams params = KvTransferParams.wrap(raw);
        if (!params.doRemoteDecode() || !params.hasTransferId()) {
            return;
        }
        int prompt = request.numPromptTokens();
        if (computedBefore < 0 || computedAfter < computedBefore || computedAfter > prompt) {
            throw new ConnectorException(String.format(Locale.ROOT, "request %s: prefill chunk [%d, %d) outside its "
                    + "%d prompt tokens", request.requestId(), computedBefore, computedAfter, prompt));
        }
        int total = ceilDiv(prompt, blockSize);
        boolean last = computedAfter == prompt;
        int first = layerwiseNextBlock.getOrDefault(request.requestId(), 0);
        int end = last ? total : computedAfter / blockSize;
        if (last) {
            layerwiseNextBlock.remove(request.requestId());
        } else {
            layerwiseNextBlock.put(request.requestId(), Math.max(first, end));
        }
        if (end <= first && !last) {
            return; // no block completed this step
        }
        int[][] chunk = new int[blockIds.length][];
        for (int g = 0; g < blockIds.length; g++) {
            if (blockIds[g].length < end) {
                throw new ConnectorException(String.format(Locale.ROOT, "request %s: prefill chunk needs %d blocks in "
                        + "group %d, got %d", request.requestId(), end, g, blockIds[g].length));
            }
            chunk[g] = Arrays.copyOfRange(blockIds[g], Math.min(first, end), end);
        }
        layerwiseChunks.put(request.requestId(), new MooncakeConnectorMetadata.LayerwiseChunk(params.transferId(),
                chunk, Math.min(first, end), total, last));
    }

    /** {@return whether {@link #recordPrefillChunk} files chunks (layer-wise push on, full-attention groups only)} */
    public boolean layerwisePush() {
        return layerwise;
    }

    /** All three keys a pull needs, present with a non-null value. */
    private static boolean hasPullKeys(KvTransferParams params) {
        return params.remoteEngineId() != null && params.remoteBootstrapAddr() != null
                && params.transferId() != null;
    }

    /**
     * vLLM's {@code get_sw_clipped_blocks}: with the hybrid KV-cache manager required (some group is
     * not full attention), keeps only the last {@code ceil(window / block_size) + 1} blocks of each
     * sliding-window group, so that P's source tail and D's destination tail line up; other groups
     * and non-hybrid configurations are returned unchanged. The result is always a fresh deep copy.
     *
     * @param blockIds block ids per KV-cache group
     * @return the block ids to transfer, per group
     * @throws ConnectorException {@code "Expected N KV cache groups, got M."} when clipping applies
     *                            and the group count differs from the configuration's
     */
    public int[][] getSwClippedBlocks(int[][] blockIds) {
        if (blockIds.length == 0) {
            return BlockIds.NONE;
        }
        if (!hmaRequired) {
            return BlockIds.copyOf(blockIds);
        }
        int groups = kvCacheConfig.groups().size();
        if (blockIds.length != groups) {
            throw new ConnectorException(String.format(Locale.ROOT, "Expected %d KV cache groups, got %d.", groups,
                    blockIds.length));
        }
        int[][] out = new int[groups][];
        for (int g = 0; g < groups; g++) {
            int[] ids = Objects.requireNonNull(blockIds[g], "block ids of a group");
            int keep = blocksPerSw[g];
            out[g] = keep > 0 && ids.length > keep ? Arrays.copyOfRange(ids, ids.length - keep, ids.length)
                    : ids.clone();
        }
        return out;
    }

    /**
     * vLLM's {@code build_connector_meta}: ships everything recorded since the previous call and
     * resets the pending state. D pulls are shipped unless this is a {@code kv_producer}; P sends
     * and not-processed transfer ids unless this is a {@code kv_consumer}.
     *
     * @return this step's metadata for every worker
     * @throws ConnectorException when a recorded request's params lost a required key in the
     *                            meantime (the pending state is reset regardless)
     */
    public MooncakeConnectorMetadata buildConnectorMeta() {
        MooncakeConnectorMetadata meta = new MooncakeConnectorMetadata();
        if (!isKvProducer) {
            Map<String, Pending> recv = reqsNeedRecv;
            reqsNeedRecv = new LinkedHashMap<>();
            for (Map.Entry<String, Pending> e : recv.entrySet()) {
                meta.addNewReq(e.getKey(), e.getValue().blockIds(), paramsOf(e.getValue().request()), true);
            }
        }
        if (!isKvConsumer) {
            Map<String, Pending> send = reqsNeedSend;
            reqsNeedSend = new LinkedHashMap<>();
            Set<String> notProcessed = reqsNotProcessed;
            reqsNotProcessed = new LinkedHashSet<>();
            for (Map.Entry<String, Pending> e : send.entrySet()) {
                Map<String, Object> params = paramsOf(e.getValue().request());
                meta.addNewReq(e.getKey(), e.getValue().blockIds(), params, false);
                if (options.transferIdCollisionGuard() && e.getValue().carriesBlocks()) {
                    release(KvTransferParams.wrap(params).transferId(), e.getKey());
                }
            }
            meta.setReqsNotProcessed(notProcessed);
            Map<String, MooncakeConnectorMetadata.LayerwiseChunk> chunks = layerwiseChunks;
            layerwiseChunks = new LinkedHashMap<>();
            chunks.forEach(meta::addLayerwiseChunk);
            Map<String, String> aborted = abortedOwners;
            abortedOwners = new HashMap<>();
            aborted.forEach(this::release);
        }
        return meta;
    }

    private static Map<String, Object> paramsOf(Request request) {
        Map<String, Object> params = request.kvTransferParams();
        if (params == null) {
            throw new ConnectorException("request " + request.requestId()
                    + " lost its kv_transfer_params between recording and build_connector_meta");
        }
        return params;
    }

    /** Frees a guarded transfer id if {@code requestId} still owns it. */
    private void release(String transferId, String requestId) {
        if (transferId != null) {
            activeTransferIds.remove(transferId, requestId);
        }
    }

    /**
     * vLLM's {@code request_finished} for a single-group request (the facade's
     * {@code request_finished(request, block_ids)}): {@code blockIds} becomes the one group.
     *
     * @param request  the request (the embedder's view of it)
     * @param blockIds block ids per KV-cache group
     * @return whether the caller must keep the blocks (P: until they are sent), and the params returned to the client
     */
    public RequestFinishedResult requestFinished(Request request, int[] blockIds) {
        return requestFinished(request, new int[][] {blockIds});
    }

    /**
     * vLLM's {@code request_finished} (HMA form, block ids per KV-cache group), called when a
     * request finished or was aborted, before its blocks are freed.
     * <ul>
     *   <li>No params or no {@code transfer_id}: {@code (false, null)}.</li>
     *   <li>D request still marked {@code do_remote_prefill} (finished before it was ever
     *       allocated): records a release-only pull (no blocks) so that P frees its blocks, clears
     *       the flag, {@code (false, null)}. Unlike vLLM, params lacking {@code remote_engine_id} or
     *       {@code remote_bootstrap_addr} are refused here with the
     *       {@code "Got invalid KVTransferParams"} warning instead of failing in
     *       {@link #buildConnectorMeta()} (spec §15 #11).</li>
     *   <li>P request ({@code do_remote_decode}) not {@link RequestStatus#FINISHED_LENGTH_CAPPED}
     *       (aborted, stopped): its transfer id goes to {@code reqs_not_processed};
     *       {@code (false, null)}.</li>
     *   <li>P request length-capped: if any group has blocks, records the sliding-window clipped
     *       blocks for sending and answers {@code (true, null)} — the embedder keeps the blocks
     *       until the worker reports the request in {@code finished_sending}; else
     *       {@code (false, null)}.</li>
     * </ul>
     * The params returned are always {@code null}.
     *
     * @param request the request (the embedder's view of it)
     * @param blockIds the request's block ids per KV-cache group
     * @return whether the caller must keep the blocks (P: until they are sent), and the params returned to the client
     */
    public RequestFinishedResult requestFinished(Request request, int[][] blockIds) {
        Objects.requireNonNull(blockIds, "blockIds");
        layerwiseNextBlock.remove(request.requestId());
        Map<String, Object> raw = request.kvTransferParams();
        if (LOG.isDebugEnabled()) {
            LOG.debug("MooncakeConnector request_finished: request {}, status {}, kv_transfer_params={}",
                    request.requestId(), request.status(), raw);
        }
        if (KvTransferParams.isNullOrEmpty(raw)) {
            return RequestFinishedResult.FREE_NOW;
        }
        KvTransferParams params = KvTransferParams.wrap(raw);
        if (!params.hasTransferId()) {
            return RequestFinishedResult.FREE_NOW;
        }
        if (params.doRemotePrefill()) {
            // Finished or aborted before update_state_after_alloc ran: tell P to free its blocks.
            requireNotProducer(request);
            if (hasPullKeys(params)) {
                reqsNeedRecv.put(request.requestId(), new Pending(request, BlockIds.NONE, false));
            } else {
                LOG.warn("Got invalid KVTransferParams: {}. This request will not utilize KVTransfer", raw);
            }
            params.setDoRemotePrefill(false);
            return RequestFinishedResult.FREE_NOW;
        }
        if (!params.doRemoteDecode()) {
            return RequestFinishedResult.FREE_NOW;
        }
        requireNotConsumer(request);
        String tid = params.transferId();
        if (options.transferIdCollisionGuard()) {
            String owner = activeTransferIds.get(tid);
            if (owner != null && !owner.equals(request.requestId())) {
                LOG.warn("request {} finished with transfer_id {} owned by request {}; nothing to send or forget",
                        request.requestId(), tid, owner);
                return RequestFinishedResult.FREE_NOW;
            }
        }
        if (request.status() != RequestStatus.FINISHED_LENGTH_CAPPED) {
            // Aborted or stopped otherwise: free now and let the worker forget the transfer.
            reqsNotProcessed.add(tid);
            if (options.transferIdCollisionGuard() && request.requestId().equals(activeTransferIds.get(tid))) {
                abortedOwners.put(tid, request.requestId());
            }
            return RequestFinishedResult.FREE_NOW;
        }
        if (!BlockIds.anyBlocks(blockIds)) {
            if (options.transferIdCollisionGuard()) {
                release(tid, request.requestId());
            }
            return RequestFinishedResult.FREE_NOW;
        }
        reqsNeedSend.put(request.requestId(), new Pending(request, getSwClippedBlocks(blockIds), true));
        return RequestFinishedResult.DELAY_FREE;
    }

    private void requireNotProducer(Request request) {
        if (isKvProducer) {
            throw new ConnectorException(String.format(Locale.ROOT,
                    "request %s has do_remote_prefill but engine %s is a kv_producer; send do_remote_prefill "
                            + "requests to a kv_consumer or kv_both engine", request.requestId(), engineId));
        }
    }

    private void requireNotConsumer(Request request) {
        if (isKvConsumer) {
            throw new ConnectorException(String.format(Locale.ROOT,
                    "request %s has do_remote_decode but engine %s is a kv_consumer; send do_remote_decode "
                            + "requests to a kv_producer or kv_both engine", request.requestId(), engineId));
        }
    }

    /** {@return this engine's id} */
    public String engineId() {
        return engineId;
    }

    /** {@return this engine's role} */
    public KvRole kvRole() {
        return kvRole;
    }

    /** {@return the scheduler block size in tokens} */
    public int blockSize() {
        return blockSize;
    }

    /** The switches this scheduler was built with. */
    Options options() {
        return options;
    }

    /** vLLM's {@code _is_hma_required}: hybrid manager enabled and some group not full attention. */
    boolean isHmaRequired() {
        return hmaRequired;
    }

    /** vLLM's {@code _has_mamba}: the configuration has Mamba/GDN layers. */
    boolean hasMamba() {
        return hasMamba;
    }

    /** vLLM's {@code blocks_per_sw}, one entry per group (0 for non-sliding-window groups); a copy. */
    int[] blocksPerSw() {
        return blocksPerSw.clone();
    }

    /** Collision guard only: the transfer ids currently owned by a P request (a copy). */
    Set<String> activeTransferIds() {
        return Set.copyOf(activeTransferIds.keySet());
    }
}
