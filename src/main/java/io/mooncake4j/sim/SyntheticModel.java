package io.mooncake4j.sim;

import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
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
 * <p>Thread-safety: immutable configuration; concurrent calls must touch different blocks.
 */
public final class SyntheticModel {

    private static final long GOLDEN = 0x9E3779B97F4A7C15L;
    private static final long LAYER_SALT = 0xC2B2AE3D27D4EB4FL;
    private static final long HEAD_SALT = 0x165667B19E3779F9L;

    /** Where one layer's blocks live. */
    private record LayerView(String name, int group, MemorySegment segment, long block0Offset, long blockStride) {}

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

    /**
     * A model rank over {@code caches}.
     *
     * @throws IllegalArgumentException when the caches are not dense host tensors of this preset's page size
     */
    public SyntheticModel(ModelPreset preset, int tpSize, int tpRank, KvCaches caches) {
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
            MemorySegment seg = t.storage().hostSegment().orElseThrow(() -> new IllegalArgumentException(
                    "layer " + e.getKey() + " is not in host memory; the synthetic model writes host memory only"));
            views.add(new LayerView(e.getKey(), groupOf.getOrDefault(e.getKey(), 0), seg,
                    t.dataAddress() - t.storage().address(), t.blockStrideBytes()));
        }
        if (views.size() != preset.numLayers()) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "caches have %d layers, model %s has %d", views.size(), preset.name(), preset.numLayers()));
        }
        this.layers = List.copyOf(views);
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

    private static long runSeed(long prefixHash, int layer, int head) {
        return mix(prefixHash + (layer + 1) * LAYER_SALT + (head + 1) * HEAD_SALT);
    }

    private long runOffset(LayerView v, int block, int localHead, int slot) {
        return v.block0Offset + block * v.blockStride + ((long) localHead * preset.blockSize() + slot) * runBytes;
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
     * this rank's heads, into the blocks {@code blockIds[group][pos / block_size]}.
     */
    public void forward(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        checkRange(prefixHashes, fromPos, toPos);
        for (int l = 0; l < layers.size(); l++) {
            LayerView v = layers.get(l);
            MemorySegment seg = v.segment;
            for (int pos = fromPos; pos < toPos; pos++) {
                int block = blockFor(blockIds, v, pos);
                int slot = pos % preset.blockSize();
                for (int h = 0; h < headsPerRank; h++) {
                    long seed = runSeed(prefixHashes[pos], l, firstHead + h);
                    long off = runOffset(v, block, h, slot);
                    for (int w = 0; w < wordsPerRun; w++) {
                        seg.set(ValueLayout.JAVA_LONG, off + (long) w * Long.BYTES, seed + w * GOLDEN);
                    }
                }
            }
        }
    }

    /**
     * Checks positions {@code [fromPos, toPos)} of every layer against what {@link #forward}
     * writes; counts every wrong 8-byte word and describes the first.
     */
    public Verification verify(long[] prefixHashes, int[][] blockIds, int fromPos, int toPos) {
        checkRange(prefixHashes, fromPos, toPos);
        long badWords = 0;
        String first = null;
        for (int l = 0; l < layers.size(); l++) {
            LayerView v = layers.get(l);
            MemorySegment seg = v.segment;
            for (int pos = fromPos; pos < toPos; pos++) {
                int block = blockFor(blockIds, v, pos);
                int slot = pos % preset.blockSize();
                for (int h = 0; h < headsPerRank; h++) {
                    long seed = runSeed(prefixHashes[pos], l, firstHead + h);
                    long off = runOffset(v, block, h, slot);
                    for (int w = 0; w < wordsPerRun; w++) {
                        long want = seed + w * GOLDEN;
                        long got = seg.get(ValueLayout.JAVA_LONG, off + (long) w * Long.BYTES);
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
                }
            }
        }
        long checked = (long) Math.max(0, toPos - fromPos) * runBytes * headsPerRank * layers.size();
        return new Verification(checked, badWords, first);
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
     */
    public record Verification(long bytesChecked, long badWords, String firstMismatch) {

        /** Whether every byte matched. */
        public boolean ok() {
            return badWords == 0;
        }
    }
}
