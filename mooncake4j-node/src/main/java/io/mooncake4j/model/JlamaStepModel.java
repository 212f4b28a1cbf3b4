package io.mooncake4j.model;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;

import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.sim.StepModel;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntConsumer;

/**
 * A {@link StepModel} over a {@link JlamaModel}: one per engine.
 *
 * <p><b>Where Jlama's KV and the connector's blocks meet: one copy per side, at the request
 * boundary.</b> Each running request has a Jlama {@code KvBuffer} of its own (an ephemeral one:
 * Jlama's public API, pages from its tensor pool, never mapped files). Positions the request finds
 * already computed (its prefix-cache hit, or on D the prompt P sent) are copied row by row from the
 * blocks into that buffer when the request first runs here; every position Jlama computes is copied
 * from the buffer into the request's blocks right after the forward pass. Jlama's pages are
 * allocated lazily, per request, at addresses of its choosing, while the connector registers its
 * blocks once at start-up with uniform strides; copying keeps Jlama unpatched (no reflection into
 * its private page table) at a cost measured in {@code docs/model.md}.
 *
 * <p>The last position of a prefill is computed on its own ({@code forward(token, pos)}), the
 * positions before it as one batch: a P/D pair then runs exactly the same arithmetic as one node
 * (P batches {@code [0, n-1)} and computes {@code n-1}; D, holding P's rows of {@code [0, n-1)},
 * computes {@code n-1} again, as vLLM's D does), so their tokens are bit-for-bit the same.
 *
 * <p>{@link #forwardLayerwise} runs the same pieces block by block, layer-major over the step's
 * requests, copying each layer's rows into the blocks as soon as that layer is computed so that the
 * connector can push them while the next layer computes ({@code layerwise_push}).
 *
 * <p>Sampling is greedy unless {@link #sampling} set a temperature for the request; a seeded request
 * draws from its own generator, so P and D (and a single node) draw the same numbers.
 *
 * <p><b>Threading:</b> {@link #sampling} from any thread; everything else on the engine's step loop.
 */
public final class JlamaStepModel implements StepModel {

    /**
     * How a request samples.
     *
     * @param temperature 0 for greedy
     * @param seed        the generator's seed (ignored when greedy)
     */
    public record Sampling(float temperature, long seed) {
        public Sampling {
            if (!(temperature >= 0) || Float.isInfinite(temperature)) {
                throw new IllegalArgumentException("temperature must be finite and >= 0, got " + temperature);
            }
        }

        /** Greedy. */
        public static Sampling greedy() {
            return new Sampling(0, 0);
        }
    }

    private final JlamaModel model;
    private final AbstractModel jlama;
    private final KvBufferCache buffers;
    private final int rowBytes;
    private final String tokenizerDigest;
    private final Map<String, Sampling> samplingById = new ConcurrentHashMap<>();
    private final Map<String, Session> sessions = new HashMap<>();
    private ModelPreset shape;
    private MemorySegment[] layerMemory;
    private long[] layerBase;
    private long pageBytes;
    /** Diagnostics: bytes copied between Jlama's pages and the blocks, and the time spent, cumulative. */
    private long copiedBytes;
    private long copyNanos;

    /** One running request: its KV buffer holds positions {@code [0, valid)}. */
    private static final class Session {
        final KvBufferCache.KvBuffer kv;
        final SplittableRandom random;
        final float temperature;
        int valid;

        Session(KvBufferCache.KvBuffer kv, Sampling s) {
            this.kv = kv;
            this.random = new SplittableRandom(s.seed());
            this.temperature = s.temperature();
        }
    }

    public JlamaStepModel(JlamaModel model) {
        this.model = model;
        this.jlama = model.jlama();
        this.buffers = new KvBufferCache(jlama);
        this.rowBytes = model.numKvHeads() * model.headSize() * model.dtypeBytes();
        this.tokenizerDigest = tokenizerDigest(model.dir());
    }

    /** The loaded model. */
    public JlamaModel model() {
        return model;
    }

    /**
     * Sets how request {@code requestId} samples (any thread, before it is submitted); greedy otherwise.
     * The setting is dropped when the request finishes.
     */
    public void sampling(String requestId, Sampling s) {
        samplingById.put(requestId, s);
    }

    /**
     * The model's layout ({@link JlamaModel#kvLayout}) and {@code /T} with a digest of its tokenizer
     * ({@link #tokenizerDigest}): the same weights behind another vocabulary or merges give other token ids
     * for the same text, so KV computed for one does not continue the other's prompt.
     */
    @Override
    public String kvLayout() {
        return model.kvLayout() + "/T" + tokenizerDigest;
    }

    /** The tokenizer files a digest covers, those present of them, in this order. */
    private static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json",
            "tokenizer.model", "special_tokens_map.json");

    /**
     * 8 hex digits of SHA-256 over the tokenizer files of checkpoint {@code dir} that exist (vocabulary,
     * merges, special tokens, chat template), each named before its bytes.
     */
    static String tokenizerDigest(java.nio.file.Path dir) {
        try {
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            for (String name : TOKENIZER_FILES) {
                java.nio.file.Path f = dir.resolve(name);
                if (java.nio.file.Files.isRegularFile(f)) {
                    md.update(name.getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    md.update(java.nio.file.Files.readAllBytes(f));
                }
            }
            return java.util.HexFormat.of().formatHex(md.digest(), 0, 4);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("cannot read the tokenizer in " + dir + ": " + e.getMessage(), e);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @Override
    public ModelPreset kvShape(int blockSize) {
        return model.kvShape(blockSize);
    }

    @Override
    public void bind(KvCaches caches) {
        if (caches.config().groups().size() != 1) {
            throw new IllegalArgumentException("a Jlama model has one full-attention KV group, caches have "
                    + caches.config().groups().size());
        }
        int layers = model.numLayers();
        List<List<KvCacheTensor>> tensors = List.copyOf(caches.tensorsByLayer().values());
        if (tensors.size() != layers) {
            throw new IllegalArgumentException("caches have " + tensors.size() + " layers, the model " + layers);
        }
        layerMemory = new MemorySegment[layers];
        layerBase = new long[layers];
        for (int l = 0; l < layers; l++) {
            List<KvCacheTensor> ts = tensors.get(l);
            if (ts.size() != 1 || !ts.get(0).blockDense()) {
                throw new IllegalArgumentException("a Jlama model needs the fused KV layout (one dense tensor per layer)");
            }
            KvCacheTensor t = ts.get(0);
            MemorySegment seg = t.storage().hostSegment().orElseThrow(() -> new IllegalArgumentException(
                    "a Jlama model needs its KV caches in host memory"));
            layerMemory[l] = seg;
            layerBase[l] = t.dataAddress() - t.storage().address();
            pageBytes = t.blockStrideBytes();
        }
        shape = caches.config().groups().get(0).spec().blockSize() > 0
                ? model.kvShape(caches.config().groups().get(0).spec().blockSize()) : null;
        if (shape == null || shape.pageBytes(1) != pageBytes) {
            throw new IllegalArgumentException("cache blocks of " + pageBytes + " bytes do not hold this model's KV");
        }
    }

    @Override
    public int forward(String requestId, int[] tokens, int[] blockIds, int from, int to) {
        Session s = session(requestId, tokens, blockIds, from, to);
        int last = to - 1;
        if (last > from) {
            AbstractTensor batch = jlama.batchForward(Arrays.copyOfRange(tokens, from, last), from, s.kv);
            batch.close();
        }
        AbstractTensor out = jlama.forward(tokens[last], last, s.kv, Optional.empty());
        int next = sample(s, out);
        for (int l = 0; l < layerMemory.length; l++) {
            copyRows(s.kv, blockIds, l, from, to, false);
        }
        s.valid = to;
        return next;
    }

    /** Jlama's transformer blocks can be run one at a time ({@code JlamaLayers}). */
    @Override
    public boolean layerwise() {
        return true;
    }

    /**
     * Layer-major over the requests, the same arithmetic as {@link #forward}: per request, the
     * positions before the last run in embedding batches of Jlama's {@code batchForward} size, the last
     * position on its own; block {@code l} of every piece reads rows of layer {@code l} only, and those
     * of earlier pieces are written before it in both orders, so the outputs are bit for bit the same.
     */
    @Override
    public int[] forwardLayerwise(List<Work> work, IntConsumer layerDone) {
        int n = work.size();
        Session[] ss = new Session[n];
        AbstractTensor[][] hidden = new AbstractTensor[n][];
        int[][] starts = new int[n][];
        try {
            for (int i = 0; i < n; i++) {
                Work w = work.get(i);
                ss[i] = session(w.requestId(), w.tokens(), w.blockIds(), w.from(), w.to());
                int last = w.to() - 1;
                int batch = JlamaLayers.maxBatchSize();
                int pieces = (last - w.from() + batch - 1) / batch;
                hidden[i] = new AbstractTensor[pieces + 1];
                starts[i] = new int[pieces + 1];
                for (int c = 0; c < pieces; c++) {
                    int a = w.from() + c * batch;
                    int b = Math.min(last, a + batch);
                    starts[i][c] = a;
                    hidden[i][c] = JlamaLayers.embedBatch(jlama, Arrays.copyOfRange(w.tokens(), a, b), a);
                }
                starts[i][pieces] = last;
                hidden[i][pieces] = JlamaLayers.embedOne(jlama, w.tokens()[last], last);
            }
            for (int l = 0; l < layerMemory.length; l++) {
                for (int i = 0; i < n; i++) {
                    for (int c = 0; c < hidden[i].length; c++) {
                        AbstractTensor in = hidden[i][c];
                        hidden[i][c] = null; // closed by the block
                        hidden[i][c] = JlamaLayers.block(jlama, l, in, starts[i][c], ss[i].kv);
                    }
                    Work w = work.get(i);
                    copyRows(ss[i].kv, w.blockIds(), l, w.from(), w.to(), false);
                }
                layerDone.accept(l);
            }
            int[] next = new int[n];
            for (int i = 0; i < n; i++) {
                AbstractTensor out = hidden[i][hidden[i].length - 1];
                hidden[i][hidden[i].length - 1] = null;
                next[i] = sample(ss[i], out);
                ss[i].valid = work.get(i).to();
            }
            return next;
        } finally {
            for (AbstractTensor[] hs : hidden) {
                if (hs != null) {
                    for (AbstractTensor h : hs) {
                        if (h != null) {
                            h.close();
                        }
                    }
                }
            }
        }
    }

    /**
     * The request's session, its buffer holding {@code [0, from)}: kept when it is there already,
     * else a fresh buffer filled from the blocks (the engine recomputes from elsewhere, a prefix-cache
     * hit, or P's KV on D).
     */
    private Session session(String requestId, int[] tokens, int[] blockIds, int from, int to) {
        if (from < 0 || to <= from || to > tokens.length) {
            throw new IllegalArgumentException("bad positions [" + from + ", " + to + ") of " + tokens.length);
        }
        if (to > model.contextLength()) {
            throw new IllegalArgumentException("position " + (to - 1) + " is past the model's context of "
                    + model.contextLength());
        }
        Session s = sessions.get(requestId);
        if (s != null && s.valid != from) {
            s.kv.close(); // the engine recomputes from elsewhere: start over from the blocks
            sessions.remove(requestId);
            s = null;
        }
        if (s == null) {
            s = new Session(buffers.getEphemeralKvBuffer(),
                    samplingById.getOrDefault(requestId, Sampling.greedy()));
            sessions.put(requestId, s);
            for (int l = 0; l < layerMemory.length; l++) {
                copyRows(s.kv, blockIds, l, 0, from, true);
            }
            s.valid = from;
        }
        return s;
    }

    /** Samples the token after {@code out} (the last position's output of the last block); closes {@code out}. */
    private int sample(Session s, AbstractTensor out) {
        try (AbstractTensor logits = jlama.makeDenseTensor(model.vocabularySize())) {
            float u = s.temperature == 0 ? 0f : (float) s.random.nextDouble();
            return jlama.sample(out, s.temperature, u, logits);
        } finally {
            out.close();
        }
    }

    /** Copies layer {@code l}'s K and V rows of positions {@code [from, to)}: blocks to buffer, or buffer to blocks. */
    private void copyRows(KvBufferCache.KvBuffer kv, int[] blockIds, int l, int from, int to, boolean intoBuffer) {
        if (from >= to) {
            return;
        }
        long t0 = System.nanoTime();
        int bs = shape.blockSize();
        long half = pageBytes / 2;
        MemorySegment mem = layerMemory[l];
        for (int p = from; p < to; p++) {
            long at = layerBase[l] + blockIds[p / bs] * pageBytes + (long) (p % bs) * rowBytes;
            MemorySegment k = kv.getKeyTensorForPosition(l, p).getMemorySegment().asSlice(0, rowBytes);
            MemorySegment v = kv.getValTensorForPosition(l, p).getMemorySegment().asSlice(0, rowBytes);
            if (intoBuffer) {
                k.copyFrom(mem.asSlice(at, rowBytes));
                v.copyFrom(mem.asSlice(at + half, rowBytes));
            } else {
                mem.asSlice(at, rowBytes).copyFrom(k);
                mem.asSlice(at + half, rowBytes).copyFrom(v);
            }
        }
        copiedBytes += 2L * rowBytes * (to - from);
        copyNanos += System.nanoTime() - t0;
    }

    /** Diagnostics: {@code {bytes copied between pages and blocks, nanoseconds spent}} so far (step loop). */
    public long[] copyStats() {
        return new long[] {copiedBytes, copyNanos};
    }

    @Override
    public void release(String requestId) {
        samplingById.remove(requestId);
        Session s = sessions.remove(requestId);
        if (s != null) {
            s.kv.close();
        }
    }

    @Override
    public void close() {
        for (Session s : sessions.values()) {
            s.kv.close();
        }
        sessions.clear();
        samplingById.clear();
    }
}
