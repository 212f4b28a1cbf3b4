package io.mooncake4j.sim;

import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.connector.BlockHasher;
import io.mooncake4j.store.connector.KvLayout;
import io.mooncake4j.store.connector.MooncakeStoreConnector;
import io.mooncake4j.store.connector.StoreConnectorConfig;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine's {@link KvPool} on Mooncake Store: vLLM's {@code MooncakeStoreConnector} keys and calls
 * ({@link MooncakeStoreConnector}) over this node's {@link MooncakeStoreClient}, at TP 1.
 *
 * <p><b>Threading:</b> as {@link KvPool}; the per-request hashes live on the step-loop thread.
 */
public final class StoreKvPool implements KvPool {

    private static final Logger LOG = LoggerFactory.getLogger(StoreKvPool.class);

    private final MooncakeStoreClient client;
    private final boolean ownsClient;
    private final MooncakeStoreConnector connector;
    private final StoreConnectorConfig config;
    private final Map<String, List<byte[]>> hashes = new HashMap<>();
    private final LongAdder hitTokens = new LongAdder();
    private final LongAdder recomputedAfterLoadError = new LongAdder();

    private StoreKvPool(MooncakeStoreClient client, boolean ownsClient, StoreConnectorConfig config, KvLayout layout,
            int blockSize) {
        this.client = client;
        this.ownsClient = ownsClient;
        this.config = config;
        this.connector = new MooncakeStoreConnector(client, config.hasher(), layout, config.options(blockSize));
    }

    /**
     * A factory that sets up a store client from {@code config} (its own transfer engine and segment)
     * when the engine creates the pool; the pool closes the client.
     */
    public static KvPool.Factory factory(StoreConnectorConfig config) {
        return (caches, blockSize) -> {
            MooncakeStoreClient c = MooncakeStoreClient.setup(config.store());
            try {
                return new StoreKvPool(c, true, config, KvLayout.of(caches), blockSize);
            } catch (RuntimeException | Error e) {
                c.close();
                throw e;
            }
        };
    }

    /** A factory over an existing client (not closed by the pool): embedders and tests. */
    public static KvPool.Factory factory(StoreConnectorConfig config, MooncakeStoreClient client) {
        return (caches, blockSize) -> new StoreKvPool(client, false, config, KvLayout.of(caches), blockSize);
    }

    /** {@return the connector (stats, hasher)} */
    public MooncakeStoreConnector connector() {
        return connector;
    }

    @Override
    public int matchedTokens(String requestId, int[] prompt, int numComputed) {
        List<byte[]> h = hashesOf(requestId, prompt);
        if (!config.canLoad()) {
            return 0;
        }
        int hit = connector.lookup(prompt.length, h);
        return Math.max(0, hit - numComputed);
    }

    private List<byte[]> hashesOf(String requestId, int[] prompt) {
        return hashes.computeIfAbsent(requestId,
                id -> connector.hasher().blockHashes(prompt, connector.options().blockSize()));
    }

    @Override
    public int load(String requestId, int[] blockIds, int fromBlock, int toBlock) {
        List<byte[]> h = hashes.get(requestId);
        if (h == null) {
            return 0;
        }
        MooncakeStoreConnector.LoadResult r = connector.load(h, blockIds, fromBlock, toBlock);
        hitTokens.add((long) r.loadedBlocks() * connector.options().blockSize());
        int missing = toBlock - fromBlock - r.loadedBlocks();
        if (missing > 0) {
            recomputedAfterLoadError.add((long) missing * connector.options().blockSize());
            LOG.debug("request {}: {} of {} pool blocks did not load; they are computed", requestId, missing,
                    toBlock - fromBlock);
        }
        return r.loadedBlocks();
    }

    @Override
    public void save(String requestId, int[] blockIds, int fromBlock, int toBlock, Runnable release) {
        List<byte[]> h = hashes.get(requestId);
        if (!config.canSave() || h == null || toBlock <= fromBlock) {
            release.run();
            return;
        }
        connector.save(h, blockIds, fromBlock, Math.min(toBlock, h.size()), r -> release.run());
    }

    @Override
    public void requestFinished(String requestId) {
        hashes.remove(requestId);
    }

    @Override
    public Map<String, Long> counters() {
        MooncakeStoreConnector.Stats s = connector.stats();
        Map<String, Long> m = new LinkedHashMap<>();
        m.put("lookups", s.lookups());
        m.put("lookup_errors", s.lookupErrors());
        m.put("hit_tokens", hitTokens.sum());
        m.put("loaded_blocks", s.loadBlocks());
        m.put("load_error_blocks", s.loadErrorBlocks());
        m.put("recomputed_tokens_after_load_error", recomputedAfterLoadError.sum());
        m.put("loaded_bytes", s.loadBytes());
        m.put("saved_blocks", s.saveBlocks());
        m.put("save_existing_blocks", s.saveExisting());
        m.put("save_backpressure_blocks", s.saveBackpressure());
        m.put("save_error_blocks", s.saveErrors());
        m.put("save_skipped_blocks", s.saveSkipped());
        m.put("pending_saves", (long) s.pendingSaves());
        return m;
    }

    @Override
    public boolean closeAndDrain() {
        boolean drained = connector.closeAndDrain();
        if (ownsClient && drained) {
            client.close();
        }
        return drained;
    }

    @Override
    public String toString() {
        return "StoreKvPool[" + connector + "]";
    }

    /** For embedders: the hasher the pool keys with. */
    public BlockHasher hasher() {
        return connector.hasher();
    }

}
