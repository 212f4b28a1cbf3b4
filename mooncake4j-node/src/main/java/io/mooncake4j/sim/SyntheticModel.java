package io.mooncake4j.sim;

import io.mooncake4j.memory.DeviceCopier;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.ModelPreset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * A stand-in for a transformer on one tensor-parallel rank: its "forward" writes deterministic
 * KV bytes into a request's blocks, and {@link #verify} checks blocks against what any rank of
 * any engine would have written for the same prompt, so a decode engine can check every byte it
 * received.
 *
 * <p><b>What the bytes depend on.</b> The KV of token position {@code pos} in layer {@code l} for
 * KV head {@code h} (the global head index, so engines with different TP sizes agree) is a run of
 * 64-bit words derived from {@code (prefixHash[pos], l, h)}, where {@code prefixHash[pos]} is a
 * chained hash of the token ids {@code 0..pos} ({@link #prefixHashes}). Like real KV, it depends
 * on the prompt content and position only — never on a request id — so prefix-cache hits are
 * consistent across requests and engines.
 *
 * <p><b>Block layout.</b> Within one block of one layer the bytes are head-major: for each local
 * head, for each token slot of the block, the K vector then the V vector
 * ({@code [head][token][K|V][head_size]}, vLLM's {@code HND}/{@code LBHNC} order; MLA: one latent
 * per token). Head-major blocks are what the connector's heterogeneous-TP plan assumes: a block of
 * a D rank holding heads {@code 0..7} is the blocks of two P ranks holding {@code 0..3} and
 * {@code 4..7} side by side. The KV caches must be dense-block host tensors (the
 * {@link io.mooncake4j.memory.KvCacheLayout#FUSED} or {@code SHARED} layouts) whose page is
 * {@link ModelPreset#pageBytes(int)} at this TP size.
 *
 * <p>Writes and checks go word by word through a {@link MemorySegment} of the layer's storage: one
 * contiguous run of {@code 2 * head_size * dtype} bytes per (token, layer, head), no per-byte work.
 *
 * <p><b>GPU-resident caches</b> ({@code cuda:N} storages, constructed with a {@link DeviceMemory}):
 * the host cannot touch the blocks, so {@link #forward} writes a layer's runs into page-locked host
 * scratch laid out like the request's blocks and copies them host-to-device in bulk — one copy per
 * run of consecutive whole blocks, one per head for a partly written block — while the next layer is
 * computed into the other half of the scratch (two completion points); {@link #verify} copies each
 * layer's touched blocks device-to-host into scratch and checks them there. Nothing is copied per token.
 *
 * <p>Thread-safety: immutable configuration; concurrent calls must touch different blocks. A model
 * over GPU memory owns a copy queue and scratch: one thread at a time, and {@link #close()} it.
 */
public final class SyntheticModel implements AutoCloseable {

    private static final long GOLDEN = 0x9E3779B97F4A7C15L;
    private static final long LAYER_SALT = 0xC2B2AE3D27D4EB4FL;
    private static final long HEAD_SALT = 0x165667B19E3779F9L;

    /**
     * Where one layer's blocks live: in host memory ({@code segment}, offsets from its start), or in
     * device memory ({@code segment} null, {@code block0Offset} the absolute device address of block 0).
     */
    private record LayerView(String name, int group, MemorySegment segment, long block0Offset, long blockStride) {}

    /** Minimum scratch allocation for GPU-resident caches. */
    private static final long MIN_SCRATCH = 1L << 20;

    private final ModelPreset preset;
    private final int tpSize;
    private final int tpRank;
    private final int headsPerRank;
    private final int firstHead;
    private final int runBytes;
    private final int wordsPerRun;
    private final long pageBytes;
    private final int numBlocks;
    private final List<LayerView> layers;
    private final DeviceMemory deviceMemory; // null for host caches
    private final DeviceCopier copier;       // null for host caches
    private HostMemoryStorage scratch;       // GPU path: page-locked staging, grown on demand

    /**
     * A model rank over host {@code caches}.
     *
     * @throws IllegalArgumentException when the caches are not dense host tensors of this preset's page size
     */
    public SyntheticModel(ModelPreset preset, int tpSize, int tpRank, KvCaches caches) {
        this(preset, tpSize, tpRank, caches, null);
    }

    /**
     * A model rank over {@code caches} that are either all in host memory or all in the memory of
     * one GPU ({@code cuda:N}), reached through {@code deviceMemory} (may be null for host caches).
     *
     * @throws IllegalArgumentException when the caches are not dense tensors of this preset's page size,
     *                                  mix host and device memory or devices, or are on a device without
     *                                  {@code deviceMemory}
     */
    public SyntheticModel(ModelPreset preset, int tpSize, int tpRank, KvCaches caches, DeviceMemory deviceMemory) {
        this.preset = Objects.requireNonNull(preset, "preset");
        if (tpRank < 0 || tpRank >= tpSize) {
            throw new IllegalArgumentException("need 0 <= tpRank < tpSize, got " + tpRank + " of " + tpSize);
        }
        this.tpSize = tpSize;
        this.tpRank = tpRank;
        this.headsPerRank = preset.kvHeadsPerRank(tpSize);
        // replicated heads (tp > heads, or MLA) all hold the same head index
        this.firstHead = preset.mla() ? 0
                : tpSize >= preset.numKvHeads() ? tpRank * preset.numKvHeads() / tpSize : tpRank * headsPerRank;
        long headBytes = (long) preset.headSize() * preset.dtypeBytes();
        this.runBytes = Math.toIntExact((preset.mla() ? 1 : 2) * headBytes);
        if (runBytes % Long.BYTES != 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "model '%s': head_size * dtype (%d bytes) must be a multiple of 8 for the synthetic model",
                    preset.name(), headBytes));
        }
        this.wordsPerRun = runBytes / Long.BYTES;
        this.pageBytes = preset.pageBytes(tpSize);
        this.numBlocks = caches.numBlocks();
        Map<String, Integer> groupOf = caches.config().transferGroupIndexByLayer();
        List<LayerView> views = new ArrayList<>();
        int device = -2; // -2 unknown yet, -1 host
        for (Map.Entry<String, List<KvCacheTensor>> e : caches.tensorsByLayer().entrySet()) {
            if (e.getValue().size() != 1) {
                throw new IllegalArgumentException("layer " + e.getKey() + " has " + e.getValue().size()
                        + " tensors; the synthetic model needs one dense tensor per layer (layout fused or shared)");
            }
            KvCacheTensor t = e.getValue().getFirst();
            if (!t.blockDense() || t.blockBytes() != pageBytes) {
                throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "layer %s: blocks must be dense pages of %d bytes (model %s, tp %d), got dense=%s bytes=%d",
                        e.getKey(), pageBytes, preset.name(), tpSize, t.blockDense(), t.blockBytes()));
            }
            int layerDevice = t.storage().isDevice()
                    ? MemoryLocation.index(t.storage().location()) : -1;
            if (device != -2 && layerDevice != device) {
                throw new IllegalArgumentException(String.format(Locale.ROOT, "layer %s is at %s but earlier layers "
                        + "are %s; the synthetic model needs every layer of a rank in one place", e.getKey(),
                        t.storage().location(), device < 0 ? "in host memory" : "on cuda:" + device));
            }
            device = layerDevice;
            int group = groupOf.getOrDefault(e.getKey(), 0);
            if (layerDevice >= 0) {
                if (deviceMemory == null) {
                    throw new IllegalArgumentException("layer " + e.getKey() + " is GPU memory at "
                            + t.storage().location() + "; the synthetic model needs a DeviceMemory to reach it");
                }
                views.add(new LayerView(e.getKey(), group, null, t.dataAddress(), t.blockStrideBytes()));
            } else {
                MemorySegment seg = t.storage().hostSegment().orElseThrow(() -> new IllegalArgumentException(
                        "layer " + e.getKey() + " is neither host memory this process can read nor cuda:N memory"));
                views.add(new LayerView(e.getKey(), group, seg, t.dataAddress() - t.storage().address(),
                        t.blockStrideBytes()));
            }
        }
        if (views.size() != preset.numLayers()) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "caches have %d layers, model %s has %d", views.size(), preset.name(), preset.numLayers()));
        }
        this.layers = List.copyOf(views);
        this.deviceMemory = device >= 0 ? deviceMemory : null;
        this.copier = device >= 0 ? new DeviceCopier(deviceMemory, device, 2) : null;
    }

    /** Whether the caches are GPU memory (written and read through copies). */
    public boolean onDevice() {
        return copier != null;
    }

    /** Releases the copy queue and the scratch of a model over GPU memory (waits for its copies); idempotent. */
    @Override
    public void close() {
        if (copier != null) {
            try {
                copier.close();
            } finally {
                if (scratch != null) {
                    scratch.close();
                    scratch = null;
                }
            }
        }
    }

    /** The model shape. */
    public ModelPreset preset() {
        return preset;
    }

    /** This rank. */
    public int tpRank() {
        return tpRank;
    }

    /** The TP size of the engine. */
    public int tpSize() {
        return tpSize;
    }

    /** Bytes of one block of all layers on this rank. */
    public long bytesPerBlock() {
        return pageBytes * layers.size();
    }

    /** Bytes of KV of one token position on this rank (all layers, this rank's heads). */
    public long bytesPerToken() {
        return (long) runBytes * headsPerRank * layers.size();
    }

    /** A 64-bit finaliser (SplitMix64's): good avalanche, cheap. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** Extends a prefix hash by one token id. */
    public static long extend(long prefixHash, int token) {
        long h = mix(prefixHash + GOLDEN + (token & 0xFFFFFFFFL));
        return h == 0 ? 1 : h; // 0 is the "no hash" of BlockPool
    }

    /** {@code out[i]} = the chained hash of {@code tokens[0..i]} (never 0). */
    public static long[] prefixHashes(int[] tokens) {
        long[] out = new long[tokens.length];
        long h = 0x6A09E667F3BCC908L;
        for (int i = 0; i < tokens.length; i++) {
            h = extend(h, tokens[i]);
            out[i] = h;
        }
        return out;
    }

    /**
     * The hashes of the full blocks among the first {@code numTokens} positions: block {@code k}'s
     * hash is the prefix hash of its last token, so it covers all earlier tokens too.
     */
    public static long[] blockHashes(long[] prefixHashes, int numTokens, int blockSize) {
        int full = Math.min(numTokens, prefixHashes.length) / blockSize;
        long[] out = new long[full];
        for (int k = 0; k < full; k++) {
            out[k] = prefixHashes[(k + 1) * blockSize - 1];
        }
        return out;
    }

    /** The token "sampled" after the prefix whose hash is {@code prefixHash} (deterministic, in 0..2^17). */
    public static int sample(long prefixHash) {
        return (int) (mix(prefixHash ^ 0x5DEECE66DL) & 0x1FFFF);
    }

    /**
     * The token "sampled" after the prefix whose hash is {@code prefixHash} by a model whose output
     * depends on the prompt's KV bytes: {@code kvDigest} is the engine's {@linkplain #kvDigest KV
     * digest} of the prompt (the sum of its ranks' parts); a digest of 0 gives {@link #sample(long)}.
     */
    public static int sample(long prefixHash, long kvDigest) {
        return sample(prefixHash ^ mix(kvDigest));
    }

    private static long runSeed(long prefixHash, int layer, int head) {
        return mix(prefixHash + (layer + 1) * LAYER_SALT + (head + 1) * HEAD_SALT);
    }

    private int blockFor(int[][] blockIds, LayerView v, int pos) {
        int[] ids = blockIds[v.group];
        int idx = pos / preset.blockSize();
        if (idx >= ids.length) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "position %d needs block #%d but the request has %d blocks in group %d", pos, idx, ids.length,
                    v.group));
        }
        int b = ids[idx];
        if (b < 0 || b >= numBlocks) {
            throw new IllegalArgumentException("block id " + b + " out of range 0.." + (numBlocks - 1));
        }
        return b;
    }

    /**
     * The forward pass of positions {@code [fromPos, toPos)}: writes their KV, for every layer and
     * this rank's heads, into the blocks {@code blockIds[group][pos / block_size]} (for GPU memory:
     * through host scratch and bulk host-to-device copies, waited for before returning).
     */
    public void forward(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        forward(prefixHashes, blockIds, fromPos, toPos, false);
    }

    /**
     * As {@link #forward}, and returns this rank's part of the {@linkplain #kvDigest KV digest} of
     * positions {@code [fromPos, toPos)}, computed from the bytes as they are written (equal to
     * {@link #kvDigest} over them afterwards, without reading them back).
     */
    public long forwardWithDigest(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        return forward(prefixHashes, blockIds, fromPos, toPos, true);
    }

    private long forward(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos, boolean digest) {
        checkRange(prefixHashes, fromPos, toPos);
        if (copier != null) {
            return forwardDevice(prefixHashes, blockIds, fromPos, toPos, digest);
        }
        long d = 0;
        for (int l = 0; l < layers.size(); l++) {
            LayerView v = layers.get(l);
            for (int pos = fromPos; pos < toPos; pos++) {
                int block = blockFor(blockIds, v, pos);
                d += writeRuns(v.segment, v.block0Offset + block * v.blockStride, prefixHashes[pos], l, pos, digest);
            }
        }
        return d;
    }

    /** The number of layers (in registration order, as {@link #layerName} numbers them). */
    public int numLayers() {
        return layers.size();
    }

    /** The registered name of layer {@code l} (what {@code saveKvLayer} is told). */
    public String layerName(int l) {
        return layers.get(l).name();
    }

    /**
     * The forward pass of layer {@code l} alone over positions {@code [fromPos, toPos)} (layer-wise
     * prefill; host caches only): writes that layer's KV as {@link #forward} does, and with
     * {@code digest} returns its part of the KV digest.
     *
     * @throws IllegalStateException for GPU caches (they are written by whole forward passes)
     */
    public long forwardLayer(int l, long[] prefixHashes, int[][] blockIds, int fromPos, int toPos, boolean digest) {
        checkRange(prefixHashes, fromPos, toPos);
        if (copier != null) {
            throw new IllegalStateException("layer-wise forward needs host caches");
        }
        LayerView v = layers.get(l);
        long d = 0;
        for (int pos = fromPos; pos < toPos; pos++) {
            int block = blockFor(blockIds, v, pos);
            d += writeRuns(v.segment, v.block0Offset + block * v.blockStride, prefixHashes[pos], l, pos, digest);
        }
        return d;
    }

    /**
     * Writes position {@code pos}'s runs of layer {@code l} into a block whose page starts at
     * {@code blockBase} of {@code seg}; with {@code digest}, returns their part of the KV digest.
     */
    private long writeRuns(MemorySegment seg, long blockBase, long prefixHash, int l, int pos, boolean digest) {
        int slot = pos % preset.blockSize();
        boolean counts = digest && countsInDigest();
        long d = 0;
        for (int h = 0; h < headsPerRank; h++) {
            long seed = runSeed(prefixHash, l, firstHead + h);
            long off = blockBase + ((long) h * preset.blockSize() + slot) * runBytes;
            long fold = 0;
            for (int w = 0; w < wordsPerRun; w++) {
                long word = seed + w * GOLDEN;
                seg.set(ValueLayout.JAVA_LONG, off + (long) w * Long.BYTES, word);
                if (counts) {
                    fold += word * (2L * w + 1);
                }
            }
            if (counts) {
                d += mix(fold ^ runKey(pos, l, firstHead + h));
            }
        }
        return d;
    }

    private long forwardDevice(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos, boolean digest) {
        if (fromPos == toPos) {
            return 0;
        }
        long d = 0;
        int bs = preset.blockSize();
        int kFrom = fromPos / bs;
        int kTo = (toPos - 1) / bs;
        long half = (long) (kTo - kFrom + 1) * pageBytes; // one layer's pages, in request block order
        MemorySegment seg = scratch(2 * half);
        long scratchAddr = scratch.address();
        for (int l = 0; l < layers.size(); l++) {
            LayerView v = layers.get(l);
            int slot = l & 1;
            if (l >= 2) {
                copier.await(slot); // the copies of layer l-2 out of this half are done
            }
            long base = slot * half;
            for (int pos = fromPos; pos < toPos; pos++) {
                blockFor(blockIds, v, pos); // range checks
                d += writeRuns(seg, base + (long) (pos / bs - kFrom) * pageBytes, prefixHashes[pos], l, pos, digest);
            }
            int runK = -1;   // first request block index of a run of whole, consecutive blocks
            int runB = -1;   // its block id
            int runLen = 0;
            for (int k = kFrom; k <= kTo; k++) {
                int b = blockFor(blockIds, v, k * bs);
                int sFrom = k == kFrom ? fromPos % bs : 0;
                int sTo = k == kTo ? (toPos - 1) % bs + 1 : bs;
                if (sFrom == 0 && sTo == bs) {
                    if (runLen > 0 && b == runB + runLen) {
                        runLen++;
                        continue;
                    }
                    flushPages(v, scratchAddr + base, kFrom, runK, runB, runLen);
                    runK = k;
                    runB = b;
                    runLen = 1;
                    continue;
                }
                long pageInScratch = scratchAddr + base + (long) (k - kFrom) * pageBytes;
                long pageOnDevice = v.block0Offset + b * v.blockStride;
                for (int h = 0; h < headsPerRank; h++) {
                    long off = ((long) h * bs + sFrom) * runBytes;
                    copier.toDevice(pageOnDevice + off, pageInScratch + off, (long) (sTo - sFrom) * runBytes);
                }
            }
            flushPages(v, scratchAddr + base, kFrom, runK, runB, runLen);
            copier.record(slot);
        }
        copier.synchronize();
        return d;
    }

    private void flushPages(LayerView v, long scratchLayer, int kFrom, int runK, int runB, int runLen) {
        if (runLen > 0) {
            copier.toDevice(v.block0Offset + runB * v.blockStride, scratchLayer + (long) (runK - kFrom) * pageBytes,
                    (long) runLen * pageBytes);
        }
    }

    /** The scratch, at least {@code bytes} long (GPU path; the queue is idle when this is called). */
    private MemorySegment scratch(long bytes) {
        if (scratch == null || scratch.byteSize() < bytes) {
            if (scratch != null) {
                scratch.close();
                scratch = null;
            }
            long size = Math.max(MIN_SCRATCH, Long.highestOneBit(Math.max(1, bytes - 1)) << 1);
            scratch = deviceMemory.allocatePinned(size);
        }
        return scratch.segment();
    }

    /**
     * Checks positions {@code [fromPos, toPos)} of every layer against what {@link #forward}
     * writes; counts every wrong 8-byte word and describes the first (for GPU memory: after copying
     * each layer's blocks device-to-host into scratch). The same pass computes this rank's part of
     * the {@linkplain #kvDigest KV digest} of the bytes it read.
     */
    public Verification verify(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        return scan(prefixHashes, blockIds, fromPos, toPos, true);
    }

    /**
     * This rank's part of the KV digest of positions {@code [fromPos, toPos)}: a function of every
     * KV byte of those positions as read from the caches now (for GPU memory: through copies into
     * scratch). Parts of the ranks of one engine add up (mod 2<sup>64</sup>) to the same value at
     * any TP size: each (position, layer, global KV head) run is folded and mixed with its
     * coordinates, and a head replicated on several ranks (TP above the head count, or MLA) counts
     * once, on its first replica. A run folds as {@code sum(word[i] * (2i + 1))} (mod 2<sup>64</sup>,
     * odd weights: a change confined to one word always changes the fold), then goes through a
     * 64-bit mixer: one changed byte changes the digest (except with probability about 2<sup>-64</sup>).
     */
    public long kvDigest(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        return scan(prefixHashes, blockIds, fromPos, toPos, false).digest();
    }

    /** Whether this rank's heads count in the digest (the first replica of a replicated head does). */
    private boolean countsInDigest() {
        if (preset.mla()) {
            return tpRank == 0;
        }
        if (tpSize > preset.numKvHeads()) {
            return tpRank % (tpSize / preset.numKvHeads()) == 0;
        }
        return true;
    }

    private static long runKey(int pos, int layer, int head) {
        return mix(pos * 0xD6E8FEB86659FD93L + (layer + 1) * LAYER_SALT + (head + 1) * HEAD_SALT);
    }

    private Verification scan(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos, boolean compare) {
        checkRange(prefixHashes, fromPos, toPos);
        long badWords = 0;
        long digest = 0;
        boolean counts = countsInDigest();
        String first = null;
        int bs = preset.blockSize();
        int kFrom = fromPos / bs;
        int kTo = toPos > fromPos ? (toPos - 1) / bs : kFrom - 1;
        MemorySegment staged = copier != null && toPos > fromPos ? scratch((long) (kTo - kFrom + 1) * pageBytes) : null;
        for (int l = 0; l < layers.size(); l++) {
            LayerView v = layers.get(l);
            MemorySegment seg = v.segment;
            if (staged != null) {
                seg = staged;
                stageToHost(v, blockIds, kFrom, kTo);
            }
            for (int pos = fromPos; pos < toPos; pos++) {
                int block = blockFor(blockIds, v, pos);
                int slot = pos % bs;
                long blockBase = staged != null ? (long) (pos / bs - kFrom) * pageBytes
                        : v.block0Offset + block * v.blockStride;
                for (int h = 0; h < headsPerRank; h++) {
                    long seed = compare ? runSeed(prefixHashes[pos], l, firstHead + h) : 0;
                    long off = blockBase + ((long) h * bs + slot) * runBytes;
                    long fold = 0;
                    for (int w = 0; w < wordsPerRun; w++) {
                        long got = seg.get(ValueLayout.JAVA_LONG, off + (long) w * Long.BYTES);
                        fold += got * (2L * w + 1);
                        if (!compare) {
                            continue;
                        }
                        long want = seed + w * GOLDEN;
                        if (got != want) {
                            if (first == null) {
                                first = String.format(Locale.ROOT,
                                        "tp rank %d/%d, layer %s, position %d (block %d slot %d), head %d, byte %d "
                                                + "of the run: expected 0x%016x, found 0x%016x",
                                        tpRank, tpSize, v.name, pos, block, slot, firstHead + h,
                                        w * Long.BYTES, want, got);
                            }
                            badWords++;
                        }
                    }
                    if (counts) {
                        digest += mix(fold ^ runKey(pos, l, firstHead + h));
                    }
                }
            }
        }
        long checked = compare ? (long) Math.max(0, toPos - fromPos) * runBytes * headsPerRank * layers.size() : 0;
        return new Verification(checked, badWords, first, digest);
    }

    /** Copies the pages of request blocks {@code kFrom..kTo} of one layer into the scratch, in request order, and waits. */
    private void stageToHost(LayerView v, int[][] blockIds, int kFrom, int kTo) {
        int bs = preset.blockSize();
        long scratchAddr = scratch.address();
        int runK = -1;
        int runB = -1;
        int runLen = 0;
        for (int k = kFrom; k <= kTo; k++) {
            int b = blockFor(blockIds, v, k * bs);
            if (runLen > 0 && b == runB + runLen) {
                runLen++;
                continue;
            }
            if (runLen > 0) {
                copier.toHost(scratchAddr + (long) (runK - kFrom) * pageBytes, v.block0Offset + runB * v.blockStride,
                        (long) runLen * pageBytes);
            }
            runK = k;
            runB = b;
            runLen = 1;
        }
        if (runLen > 0) {
            copier.toHost(scratchAddr + (long) (runK - kFrom) * pageBytes, v.block0Offset + runB * v.blockStride,
                    (long) runLen * pageBytes);
        }
        copier.synchronize();
    }

    private static void checkRange(long[] prefixHashes, int fromPos, int toPos) {
        if (fromPos < 0 || toPos < fromPos || toPos > prefixHashes.length) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "positions [%d, %d) outside the %d known tokens", fromPos, toPos, prefixHashes.length));
        }
    }

    /**
     * The outcome of {@link #verify}.
     *
     * @param bytesChecked   bytes compared
     * @param badWords       8-byte words that differed
     * @param firstMismatch  where the first difference was, or {@code null} when none
     * @param digest         this rank's part of the {@linkplain #kvDigest KV digest} of the bytes read
     */
    public record Verification(long bytesChecked, long badWords, String firstMismatch, long digest) {

        /** A verification without a digest (0). */
        public Verification(long bytesChecked, long badWords, String firstMismatch) {
            this(bytesChecked, badWords, firstMismatch, 0);
        }

        /** Whether every byte matched. */
        public boolean ok() {
            return badWords == 0;
        }
    }
}
