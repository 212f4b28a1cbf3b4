package io.mooncake4j.store.connector;

import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.store.ErrorCode;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * vLLM's v1 {@code MooncakeStoreConnector} on one rank, over a {@link MooncakeStoreClient}: the
 * scheduler side's {@link #lookup} (one {@code batch_is_exist} over every candidate key in every rank
 * namespace, the longest prefix present in all of them, a full hit cut back so the last token is
 * recomputed, a store error a hit of 0) and the worker side's {@link #load} (one multi-buffer
 * zero-copy get, one object per block, the block's per-layer slices as its parts) and {@link #save}
 * (in the background: keys already present skipped, one multi-buffer put with per-key results,
 * {@code -705} counted as saved, {@code -200} pool-full as backpressure).
 *
 * <p>Keys are vLLM's ({@link PoolKeys}, {@link BlockHasher}), so Python vLLM nodes with the same model
 * name, layout, hash algorithm and seed share the blocks (see {@code docs/store-connector.md} for what
 * else must match).
 *
 * <p><b>Threading:</b> {@link #lookup} and {@link #load} run on the caller's thread (the step loop);
 * they are bounded by the client's RPC deadline. {@link #save} only enqueues: one background thread
 * does the store calls and tells {@code done} when the blocks may be reused. Stats from any thread.
 * The caller keeps the blocks of a save from being overwritten until its {@code done} ran.
 *
 * @see <a href="https://github.com/vllm-project/vllm/blob/main/vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py">worker.py</a>
 */
public final class MooncakeStoreConnector implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeStoreConnector.class);

    /** How long saving pauses after the pool reported itself full ({@code -200}). */
    static final long BACKPRESSURE_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    /**
     * The connector's parallel layout and policies.
     *
     * @param namespace         this rank's namespace of group 0 (its {@code tp_rank} already divided by the factor)
     * @param tpRank            this rank's TP rank (put striping, load rotation)
     * @param lookupNamespaces  every namespace a hit must be present in ({@link PoolKeys#lookupNamespaces})
     * @param putStep           the group's TP replication factor: this rank puts every {@code putStep}-th block
     * @param blockSize         tokens per block (the key granularity)
     * @param preferredSegment  the segment puts prefer ({@code preferred_segment}), or null
     * @param lifecycleGroups   whether puts carry vLLM's {@code group_ids}
     * @param maxPendingSaves   saves queued or running at most; more are skipped (counted)
     * @param closeTimeout      how long {@link #close} waits for running saves
     */
    public record Options(PoolKeys namespace, int tpRank, List<PoolKeys> lookupNamespaces, int putStep, int blockSize,
                          String preferredSegment, boolean lifecycleGroups, int maxPendingSaves, Duration closeTimeout) {
        /** Checks the values. */
        public Options {
            Objects.requireNonNull(namespace, "namespace");
            lookupNamespaces = List.copyOf(lookupNamespaces);
            if (lookupNamespaces.isEmpty() || putStep <= 0 || blockSize <= 0 || maxPendingSaves <= 0 || tpRank < 0) {
                throw new IllegalArgumentException("bad store connector options: " + lookupNamespaces.size()
                        + " namespaces, put step " + putStep + ", block " + blockSize + ", pending " + maxPendingSaves);
            }
            Objects.requireNonNull(closeTimeout, "closeTimeout");
        }

        /**
         * A single rank (TP 1): its own namespace is the only one.
         *
         * @param namespace the rank's namespace
         * @param blockSize tokens per block
         * @return the options (64 pending saves, 30 s to drain, lifecycle groups on)
         */
        public static Options singleRank(PoolKeys namespace, int blockSize) {
            return new Options(namespace, 0, List.of(namespace), 1, blockSize, null, true, 64, Duration.ofSeconds(30));
        }

        /**
         * The same options with another preferred segment.
         *
         * @param segment {@code host:port}, or null for none
         * @return the options
         */
        public Options withPreferredSegment(String segment) {
            return new Options(namespace, tpRank, lookupNamespaces, putStep, blockSize, segment, lifecycleGroups,
                    maxPendingSaves, closeTimeout);
        }
    }

    /**
     * What a {@link #load} did.
     *
     * @param loadedBlocks  leading blocks of the range that arrived whole (the usable prefix)
     * @param failedBlocks  block ids whose key failed to load (vLLM's {@code block_ids_with_load_errors}); recompute them
     * @param bytes         bytes read
     */
    public record LoadResult(int loadedBlocks, int[] failedBlocks, long bytes) {}

    /**
     * What one {@link #save} did.
     *
     * @param saved       blocks put now
     * @param existing    blocks already in the pool (skipped)
     * @param backpressure blocks not put because the pool was full
     * @param failed      blocks whose put failed otherwise
     */
    public record SaveResult(int saved, int existing, int backpressure, int failed) {}

    /**
     * Counters since start (see {@link MooncakeStoreConnector#stats()}).
     *
     * @param lookups          lookups made (requests of at least one block)
     * @param lookupErrors     lookups the store could not answer (a hit of 0)
     * @param lookupHitTokens  tokens the lookups found
     * @param loadBlocks       blocks loaded whole and used
     * @param loadErrorBlocks  blocks whose load failed (recomputed)
     * @param loadBytes        bytes loaded
     * @param loadNanos        time spent in loads
     * @param saveBlocks       blocks put
     * @param saveExisting     blocks skipped because the pool had them
     * @param saveBackpressure blocks not put because the pool was full
     * @param saveErrors       blocks whose put failed otherwise
     * @param saveSkipped      blocks of saves not queued (closed, too many pending)
     * @param saveBytes        bytes put
     * @param pendingSaves     saves queued or running now
     */
    public record Stats(long lookups, long lookupErrors, long lookupHitTokens, long loadBlocks, long loadErrorBlocks,
                        long loadBytes, long loadNanos, long saveBlocks, long saveExisting, long saveBackpressure,
                        long saveErrors, long saveSkipped, long saveBytes, int pendingSaves) {}

    private final MooncakeStoreClient client;
    private final BlockHasher hasher;
    private final KvLayout layout;
    private final Options options;
    private final ExecutorService saver;
    private final AtomicInteger pending = new AtomicInteger();
    private final List<Long> registered = new ArrayList<>();
    private volatile boolean closed;
    private final AtomicLong pausedUntil = new AtomicLong(System.nanoTime());
    private final LongAdder lookups = new LongAdder();
    private final LongAdder lookupErrors = new LongAdder();
    private final LongAdder lookupHitTokens = new LongAdder();
    private final LongAdder loadBlocks = new LongAdder();
    private final LongAdder loadErrorBlocks = new LongAdder();
    private final LongAdder loadBytes = new LongAdder();
    private final LongAdder loadNanos = new LongAdder();
    private final LongAdder saveBlocks = new LongAdder();
    private final LongAdder saveExisting = new LongAdder();
    private final LongAdder saveBackpressure = new LongAdder();
    private final LongAdder saveErrors = new LongAdder();
    private final LongAdder saveSkipped = new LongAdder();
    private final LongAdder saveBytes = new LongAdder();
    private volatile String lastSaveError;

    /**
     * Registers every storage of {@code layout} with the client once (vLLM's {@code register_kv_caches});
     * a failed registration is logged and counted by the client: loads and saves over it then fail per key.
     *
     * @param client  the store client (not closed by this connector)
     * @param hasher  the block hash every node of the pool shares
     * @param layout  where the KV blocks lie
     * @param options the rank's namespaces and policies
     */
    public MooncakeStoreConnector(MooncakeStoreClient client, BlockHasher hasher, KvLayout layout, Options options) {
        this.client = Objects.requireNonNull(client, "client");
        this.hasher = Objects.requireNonNull(hasher, "hasher");
        this.layout = Objects.requireNonNull(layout, "layout");
        this.options = Objects.requireNonNull(options, "options");
        for (MemoryStorage s : layout.storages()) {
            int rc = client.registerBuffer(s.address(), s.byteSize());
            if (rc != 0) {
                LOG.error("store connector: registering KV memory [0x{}, +{}) failed: {}; its blocks will not load or save",
                        Long.toHexString(s.address()), s.byteSize(), ErrorCode.describe(rc));
            } else {
                registered.add(s.address());
            }
        }
        this.saver = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mooncake-store-save");
            t.setDaemon(true);
            return t;
        });
    }

    /** {@return the block hasher (the algorithm and seed every node of the pool must share)} */
    public BlockHasher hasher() {
        return hasher;
    }

    /** {@return the options} */
    public Options options() {
        return options;
    }

    /** {@return the KV layout} */
    public KvLayout layout() {
        return layout;
    }

    // ------------------------------------------------------------------ scheduler side

    /**
     * vLLM's {@code lookup(num_tokens, block_hashes)}: how many leading tokens of a request of
     * {@code numTokens} tokens the pool holds in every namespace, in whole blocks, never all of them (the
     * last token is always computed); 0 when the store cannot be asked.
     *
     * @param numTokens the request's tokens
     * @param hashes    the request's block hashes ({@link BlockHasher#blockHashes})
     * @return the tokens the pool holds, a multiple of the block size below {@code numTokens}
     */
    public int lookup(int numTokens, List<byte[]> hashes) {
        int bs = options.blockSize();
        int chunks = Math.min(hashes.size(), numTokens / bs);
        if (chunks <= 0) {
            return 0;
        }
        lookups.increment();
        List<PoolKeys> ns = options.lookupNamespaces();
        List<String> keys = new ArrayList<>(chunks * ns.size());
        for (int c = 0; c < chunks; c++) {
            for (PoolKeys k : ns) {
                keys.add(k.key(hashes.get(c)));
            }
        }
        int[] res;
        try {
            res = client.batchIsExist(keys);
        } catch (RuntimeException e) {
            lookupErrors.increment();
            LOG.warn("store connector: lookup failed, recomputing: {}", e.toString());
            return 0;
        }
        if (res.length != keys.size()) {
            lookupErrors.increment();
            return 0;
        }
        int hit = 0;
        boolean errors = false;
        outer:
        for (int c = 0; c < chunks; c++) {
            for (int j = 0; j < ns.size(); j++) {
                int r = res[c * ns.size() + j];
                if (r != 1) {
                    errors |= r < 0;
                    break outer;
                }
            }
            hit = c + 1;
        }
        if (errors && hit == 0) {
            lookupErrors.increment();
        }
        int tokens = hit * bs;
        if (tokens >= numTokens) {
            tokens = (numTokens - 1) / bs * bs; // the last token is computed to sample from
        }
        lookupHitTokens.add(tokens);
        return tokens;
    }

    // ------------------------------------------------------------------ worker side

    /**
     * Loads blocks {@code [fromChunk, toChunk)} of a request into {@code blockIds[fromChunk..toChunk)}
     * with one multi-buffer get from this rank's namespace. A key that fails or returns other than a
     * whole block is reported in {@link LoadResult#failedBlocks()}; only the leading blocks before the
     * first failure count as loaded.
     *
     * @param hashes    the request's block hashes
     * @param blockIds  the request's block ids, in position order
     * @param fromChunk the first block to load
     * @param toChunk   one past the last
     * @return what arrived
     */
    public LoadResult load(List<byte[]> hashes, int[] blockIds, int fromChunk, int toChunk) {
        Objects.checkFromToIndex(fromChunk, toChunk, Math.min(hashes.size(), blockIds.length));
        int n = toChunk - fromChunk;
        if (n == 0) {
            return new LoadResult(0, new int[0], 0);
        }
        long t0 = System.nanoTime();
        List<String> keys = new ArrayList<>(n);
        long[][] addrs = new long[n][];
        long[][] sizes = new long[n][];
        long[] partSizes = layout.sizes();
        for (int i = 0; i < n; i++) {
            keys.add(options.namespace().key(hashes.get(fromChunk + i)));
            addrs[i] = layout.addresses(blockIds[fromChunk + i]);
            sizes[i] = partSizes;
        }
        long[] got;
        try {
            got = client.batchGetIntoMultiBuffers(keys, addrs, sizes);
        } catch (RuntimeException e) {
            LOG.warn("store connector: load of {} blocks failed, recomputing: {}", n, e.toString());
            got = new long[n];
            Arrays.fill(got, ErrorCode.RPC_FAIL.code());
        }
        long want = layout.blockBytes();
        int loaded = 0;
        boolean prefix = true;
        long bytes = 0;
        List<Integer> failed = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            boolean ok = got.length == n && got[i] == want;
            if (ok) {
                bytes += want;
                if (prefix) {
                    loaded++;
                }
            } else {
                prefix = false;
                failed.add(blockIds[fromChunk + i]);
                if (got.length == n && got[i] >= 0) {
                    LOG.warn("store connector: {} returned {} bytes, a block is {}: not loaded", keys.get(i), got[i], want);
                }
            }
        }
        loadBlocks.add(loaded);
        loadErrorBlocks.add(failed.size());
        loadBytes.add(bytes);
        loadNanos.add(System.nanoTime() - t0);
        return new LoadResult(loaded, failed.stream().mapToInt(Integer::intValue).toArray(), bytes);
    }

    /**
     * Queues the save of blocks {@code [fromChunk, toChunk)} of a request (the ones this rank stripes).
     * {@code done} runs exactly once, on the save thread (or here when the save is not queued), after
     * the store stopped reading the blocks: only then may they be overwritten.
     *
     * @param hashes    the request's block hashes
     * @param blockIds  the request's block ids, in position order
     * @param fromChunk the first block to save
     * @param toChunk   one past the last
     * @param done      told the outcome once the store no longer reads the blocks
     * @return false when the save was not queued (connector closed, too many pending): {@code done} ran already
     */
    public boolean save(List<byte[]> hashes, int[] blockIds, int fromChunk, int toChunk, Consumer<SaveResult> done) {
        Objects.requireNonNull(done, "done");
        Objects.checkFromToIndex(fromChunk, toChunk, Math.min(hashes.size(), blockIds.length));
        List<byte[]> hs = List.copyOf(hashes.subList(fromChunk, toChunk));
        int[] ids = Arrays.copyOfRange(blockIds, fromChunk, toChunk);
        if (closed || pending.incrementAndGet() > options.maxPendingSaves()) {
            if (!closed) {
                pending.decrementAndGet();
            }
            saveSkipped.add(hs.size());
            done.accept(new SaveResult(0, 0, 0, 0));
            return false;
        }
        try {
            saver.execute(() -> {
                SaveResult r = new SaveResult(0, 0, 0, hs.size());
                try {
                    r = doSave(hs, ids, fromChunk);
                } catch (RuntimeException | Error e) {
                    saveErrors.add(hs.size());
                    reportSaveError(e.toString());
                } finally {
                    pending.decrementAndGet();
                    try {
                        done.accept(r);
                    } catch (RuntimeException e) {
                        LOG.warn("store connector: a save's completion callback failed", e);
                    }
                }
            });
            return true;
        } catch (RejectedExecutionException e) {
            pending.decrementAndGet();
            saveSkipped.add(hs.size());
            done.accept(new SaveResult(0, 0, 0, 0));
            return false;
        }
    }

    private SaveResult doSave(List<byte[]> hashes, int[] blockIds, int firstChunk) {
        if (System.nanoTime() - pausedUntil.get() < 0) {
            saveBackpressure.add(hashes.size());
            return new SaveResult(0, 0, hashes.size(), 0);
        }
        List<String> keys = new ArrayList<>();
        List<Integer> idx = new ArrayList<>();
        for (int i = 0; i < hashes.size(); i++) {
            if (PoolKeys.storesChunk(firstChunk + i, options.tpRank(), options.namespace().groupId(), options.putStep())) {
                keys.add(options.namespace().key(hashes.get(i)));
                idx.add(i);
            }
        }
        if (keys.isEmpty()) {
            return new SaveResult(0, 0, 0, 0);
        }
        int[] exist = client.batchIsExist(keys);
        List<String> putKeys = new ArrayList<>();
        List<Integer> putIdx = new ArrayList<>();
        int existing = 0;
        for (int i = 0; i < keys.size(); i++) {
            if (exist.length == keys.size() && exist[i] == 1) {
                existing++;
            } else {
                putKeys.add(keys.get(i));
                putIdx.add(idx.get(i));
            }
        }
        saveExisting.add(existing);
        if (putKeys.isEmpty()) {
            return new SaveResult(0, existing, 0, 0);
        }
        long[][] addrs = new long[putKeys.size()][];
        long[][] sizes = new long[putKeys.size()][];
        long[] partSizes = layout.sizes();
        List<String> groups = new ArrayList<>();
        for (int i = 0; i < putKeys.size(); i++) {
            int k = putIdx.get(i);
            addrs[i] = layout.addresses(blockIds[k]);
            sizes[i] = partSizes;
            groups.add(options.namespace().lifecycleGroup(hashes.get(k)));
        }
        ReplicateConfig cfg = ReplicateConfig.defaults();
        if (options.preferredSegment() != null) {
            cfg = cfg.withPreferredSegment(options.preferredSegment());
        }
        if (options.lifecycleGroups()) {
            cfg = cfg.withGroupIds(groups);
        }
        int[] rc = client.batchPutFromMultiBuffers(putKeys, addrs, sizes, cfg);
        int saved = 0;
        int full = 0;
        int failed = 0;
        for (int i = 0; i < putKeys.size(); i++) {
            int c = i < rc.length ? rc[i] : ErrorCode.INVALID_PARAMS.code();
            if (c == 0 || c == ErrorCode.OBJECT_ALREADY_EXISTS.code()) {
                saved++;
            } else if (c == ErrorCode.NO_AVAILABLE_HANDLE.code()) {
                full++;
            } else {
                failed++;
                reportSaveError(putKeys.get(i) + ": " + ErrorCode.describe(c));
            }
        }
        if (full > 0) {
            pausedUntil.set(System.nanoTime() + BACKPRESSURE_PAUSE_NANOS);
            LOG.debug("store connector: pool full for {} blocks; saving pauses", full);
        }
        saveBlocks.add(saved);
        saveBackpressure.add(full);
        saveErrors.add(failed);
        saveBytes.add(saved * layout.blockBytes());
        return new SaveResult(saved, existing, full, failed);
    }

    private void reportSaveError(String what) {
        if (!what.equals(lastSaveError)) {
            lastSaveError = what;
            LOG.warn("store connector: save failed: {} (the request is served; the blocks are not shared)", what);
        }
    }

    /** {@return the counters} */
    public Stats stats() {
        return new Stats(lookups.sum(), lookupErrors.sum(), lookupHitTokens.sum(), loadBlocks.sum(),
                loadErrorBlocks.sum(), loadBytes.sum(), loadNanos.sum(), saveBlocks.sum(), saveExisting.sum(),
                saveBackpressure.sum(), saveErrors.sum(), saveSkipped.sum(), saveBytes.sum(), pending.get());
    }

    /** {@return saves queued or running} */
    public int pendingSaves() {
        return pending.get();
    }

    /**
     * Stops taking saves, waits (up to {@link Options#closeTimeout()}) for the queued ones, then
     * unregisters the KV memory; the client stays open. Idempotent.
     *
     * @return true when every save ended (the KV memory may be freed), false when one still runs
     */
    public boolean closeAndDrain() {
        if (closed) {
            return saver.isTerminated();
        }
        closed = true;
        saver.shutdown();
        boolean done;
        try {
            done = saver.awaitTermination(options.closeTimeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            done = false;
        }
        if (!done) {
            LOG.error("store connector: {} saves still running after {}; the KV memory stays registered",
                    pending.get(), options.closeTimeout());
            return false;
        }
        for (long a : registered) {
            client.unregisterBuffer(a);
        }
        registered.clear();
        return true;
    }

    @Override
    public void close() {
        closeAndDrain();
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "MooncakeStoreConnector[%s, %s, %d regions of %d blocks]",
                options.namespace().prefix(), hasher, layout.regions().size(), layout.numBlocks());
    }
}
