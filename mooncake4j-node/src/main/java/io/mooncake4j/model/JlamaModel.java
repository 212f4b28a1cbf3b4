package io.mooncake4j.model;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.model.llama.LlamaConfig;
import com.github.tjake.jlama.model.llama.LlamaModel;
import com.github.tjake.jlama.model.mistral.MistralConfig;
import com.github.tjake.jlama.model.mistral.MistralModel;
import com.github.tjake.jlama.model.qwen2.Qwen2Config;
import com.github.tjake.jlama.model.qwen2.Qwen2Model;
import com.github.tjake.jlama.safetensors.Config;
import com.github.tjake.jlama.safetensors.DType;
import com.github.tjake.jlama.safetensors.SafeTensorSupport;
import com.github.tjake.jlama.safetensors.WeightLoader;
import com.github.tjake.jlama.safetensors.prompt.PromptContext;
import com.github.tjake.jlama.safetensors.prompt.PromptSupport;
import com.github.tjake.jlama.util.JsonSupport;

import io.mooncake4j.memory.ModelPreset;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Jlama model loaded from a Hugging Face-style directory, with what a serving node needs around
 * it: the KV shape of its blocks, a fingerprint of the KV layout, the tokenizer and the chat
 * template. The directory is checked before Jlama sees it ({@link Checkpoints}), so a missing file, an
 * unsupported architecture, dtype or tokenizer feature is a clear {@link IllegalArgumentException}
 * naming it, never a stack trace from inside Jlama. Jlama computes; the text goes through our
 * {@link HfTokenizer} (Jlama's model is constructed with it, not with Jlama's own tokenizer).
 *
 * <p>The weights are shared, read-only, by every {@link JlamaStepModel} made from this object (one
 * per engine); Jlama's kernels run on its own shared thread pool. Closing releases the weights.
 */
public final class JlamaModel implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(JlamaModel.class);

    private final Path dir;
    private final AbstractModel model;
    private final String modelType;
    private final DType workingDType;
    private final Path work;
    private final String digest;
    private final HfTokenizer tokenizer;
    private final WeightLoader weights;
    private final int contextLength;
    private final List<Integer> eosTokens;

    private JlamaModel(Path dir, AbstractModel model, String modelType, DType workingDType, Path work, String digest,
            HfTokenizer tokenizer, WeightLoader weights, int slidingWindow, List<Integer> generationEos) {
        this.tokenizer = tokenizer;
        this.weights = weights;
        int ctx = model.getConfig().contextLength;
        this.contextLength = slidingWindow > 0 ? Math.min(ctx, slidingWindow) : ctx;
        java.util.LinkedHashSet<Integer> eos = new java.util.LinkedHashSet<>(model.getConfig().eosTokens);
        eos.addAll(generationEos);
        this.eosTokens = List.copyOf(eos);
        this.work = work;
        this.digest = digest;
        this.dir = dir;
        this.model = model;
        this.modelType = modelType;
        this.workingDType = workingDType;
    }

    /**
     * Loads the model in {@code dir}.
     *
     * @param dir     a directory with {@code config.json}, {@code tokenizer.json} and {@code model.safetensors}
     *                (or a {@code model.safetensors.index.json} with its shards)
     * @param working the working dtype of activations and KV: {@code F32} or {@code BF16}
     * @throws IllegalArgumentException when the directory is missing or incomplete, the architecture is
     *                                  not supported, or Jlama rejects the checkpoint
     */
    public static JlamaModel load(Path dir, String working) {
        DType dtype = switch (working.toUpperCase(Locale.ROOT)) {
            case "F32", "FLOAT32" -> DType.F32;
            case "BF16", "BFLOAT16" -> DType.BF16;
            default -> throw new IllegalArgumentException("KV dtype must be F32 or BF16, got " + working);
        };
        JlamaKernels.prepare(dtype.name()); // native kernels for F32, the Vector API's for BF16
        Checkpoints.Checked checked = Checkpoints.check(dir);
        String type = checked.modelType();
        if (type.equals("qwen2") && dtype == DType.BF16 && !checked.weightsDType().equals("BF16")) {
            // Jlama adds the q/k/v biases in the weights' dtype to BF16 activations only when both are BF16
            throw new IllegalArgumentException("working dtype BF16 with " + checked.weightsDType() + " weights is not "
                    + "supported for qwen2 (its q/k/v biases): use --dtype F32, or BF16 weights");
        }
        HfTokenizer tok = HfTokenizer.load(dir);
        int vocab = ((Number) checked.config().get("vocab_size")).intValue();
        if (tok.size() > vocab) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "the tokenizer has %d ids, more than the "
                    + "model's vocab_size %d (its embeddings have no row for the others)", tok.size(), vocab));
        }
        List<Integer> generationEos = new java.util.ArrayList<>(Checkpoints.configEos(checked.config()));
        generationEos.addAll(Checkpoints.generationEos(dir));
        AbstractModel m;
        Path work;
        try {
            // Jlama wants a working directory (without one it makes a temporary directory it never
            // removes): ours, removed on close; the step models use no file-backed pages in it
            Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
            Files.createDirectories(tmp);
            work = Files.createTempDirectory(tmp, "mooncake4j-jlama-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a working directory for the model: " + e.getMessage(), e);
        }
        WeightLoader wl = null;
        try {
            // ModelSupport.loadModel's steps, with our tokenizer in place of Jlama's
            Class<? extends Config> configClass = switch (type) {
                case "qwen2" -> Qwen2Config.class;
                case "mistral" -> MistralConfig.class;
                default -> LlamaConfig.class;
            };
            var tree = (com.fasterxml.jackson.databind.node.ObjectNode) JsonSupport.om.readTree(
                    dir.resolve("config.json").toFile());
            if (tree.get("eos_token_id") != null && tree.get("eos_token_id").isArray()
                    && !tree.get("eos_token_id").isEmpty() && !type.equals("llama")) {
                // Jlama's Mistral and Qwen2 configs read one id; every id still ends a sequence (eosTokens)
                tree.put("eos_token_id", tree.get("eos_token_id").get(0).asInt());
            }
            Config c = JsonSupport.om.treeToValue(tree, configClass);
            c.setWorkingDirectory(work.toFile());
            wl = SafeTensorSupport.loadWeights(dir.toFile());
            JlamaTokenizer jt = new JlamaTokenizer(tok, dir);
            var full = AbstractModel.InferenceType.FULL_GENERATION;
            m = switch (type) {
                case "qwen2" -> new Qwen2Model(full, c, wl, jt, dtype, DType.I8, Optional.empty());
                case "mistral" -> new MistralModel(full, c, wl, jt, dtype, DType.I8, Optional.empty());
                default -> new LlamaModel(full, c, wl, jt, dtype, DType.I8, Optional.empty());
            };
        } catch (IOException | RuntimeException e) {
            closeQuietly(wl);
            deleteTree(work);
            throw new IllegalArgumentException(String.format(Locale.ROOT, "model directory %s cannot be loaded: %s",
                    dir, rootMessage(e)), e);
        }
        Config c = m.getConfig();
        if (c.headSize % 32 != 0 && dtype == DType.BF16) {
            m.close();
            closeQuietly(wl);
            deleteTree(work);
            throw new IllegalArgumentException("BF16 needs a head dimension that is a multiple of 32, model has "
                    + c.headSize + "; use F32");
        }
        String digest;
        try {
            digest = checkpointDigest(dir);
        } catch (RuntimeException e) {
            m.close();
            closeQuietly(wl);
            deleteTree(work);
            throw e;
        }
        return new JlamaModel(dir, m, type, dtype, work, digest, tok, wl, checked.slidingWindow(), generationEos);
    }

    private static void closeQuietly(WeightLoader wl) {
        if (wl != null) {
            try {
                wl.close();
            } catch (Exception e) {
                LOG.warn("cannot close the model's weights: {}", e.toString());
            }
        }
    }

    private static void deleteTree(Path p) {
        try (var s = Files.walk(p)) {
            for (Path f : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(f);
            }
        } catch (IOException e) {
            LOG.warn("cannot remove the model's working directory {}: {}", p, e.toString());
        }
    }

    /** Checks the directory's files, architecture and weights ({@link Checkpoints}); returns the {@code model_type}. */
    static String check(Path dir) {
        return Checkpoints.check(dir).modelType();
    }

    private static String rootMessage(Throwable t) {
        Throwable r = t;
        while (r.getCause() != null && r.getCause() != r) {
            r = r.getCause();
        }
        return r.getClass().getSimpleName() + (r.getMessage() == null ? "" : ": " + r.getMessage());
    }

    /** The Jlama model (weights shared by every step model made from this). */
    AbstractModel jlama() {
        return model;
    }

    /** The model directory. */
    public Path dir() {
        return dir;
    }

    /** The working dtype name, {@code F32} or {@code BF16}. */
    public String workingDType() {
        return workingDType.name();
    }

    /** Bytes of one KV element in the working dtype. */
    public int dtypeBytes() {
        return workingDType.size();
    }

    /**
     * {@code max_position_embeddings}, or a Mistral's {@code sliding_window} when smaller (Jlama attends to
     * the whole context, which equals a sliding window only up to its length): prompt plus output may not
     * exceed it.
     */
    public int contextLength() {
        return contextLength;
    }

    /** {@code vocab_size}. */
    public int vocabularySize() {
        return model.getConfig().vocabularySize;
    }

    /**
     * The end-of-sequence token ids: {@code config.json}'s (one or a list) and {@code generation_config.json}'s
     * (vLLM stops on both; an instruct model's chat end token is often only in the latter).
     */
    public List<Integer> eosTokens() {
        return eosTokens;
    }

    /** Attention layers. */
    public int numLayers() {
        return model.getConfig().numberOfLayers;
    }

    /** KV heads. */
    public int numKvHeads() {
        return model.getConfig().numberOfKeyValueHeads;
    }

    /** The head dimension. */
    public int headSize() {
        return model.getConfig().headSize;
    }

    /** The KV shape of a block of {@code blockSize} tokens (one rank: Jlama runs the whole model here). */
    public ModelPreset kvShape(int blockSize) {
        return new ModelPreset("jlama-" + modelType + "-" + workingDType.name().toLowerCase(Locale.ROOT), numLayers(),
                numKvHeads(), headSize(), dtypeBytes(), blockSize, false);
    }

    /**
     * What a KV block means: architecture, layers, heads, head size, dtype and a digest of the
     * checkpoint ({@link #checkpointDigest}), e.g. {@code llama/L2/H4/KV2/D32/F32/1f0c...}. Two nodes
     * exchange KV only when these are equal: a byte-compatible layout of another model (same shapes,
     * other weights) would decode into garbage. The same checkpoint in two directories gives the same
     * value.
     */
    public String kvLayout() {
        return String.format(Locale.ROOT, "%s/L%d/H%d/KV%d/D%d/%s/%s", modelType, numLayers(),
                model.getConfig().numberOfHeads, numKvHeads(), headSize(), workingDType.name(), digest);
    }

    /** Bytes of each weights file that {@link #checkpointDigest} reads: the header and the first tensors. */
    private static final int DIGEST_PREFIX_BYTES = 1 << 20;

    /**
     * 16 hex digits of SHA-256 over {@code config.json} and the first MiB of each {@code *.safetensors}
     * file (name order): the safetensors header (names, shapes, offsets) and the first weights, which
     * differ between two checkpoints of one architecture (fine-tunes, other seeds). Reading a prefix
     * keeps start-up cheap for checkpoints of many GiB.
     */
    static String checkpointDigest(Path dir) {
        try {
            java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
            md.update(Files.readAllBytes(dir.resolve("config.json")));
            List<Path> weights;
            try (var files = Files.list(dir)) {
                weights = files.filter(f -> f.getFileName().toString().endsWith(".safetensors")).sorted().toList();
            }
            byte[] buf = new byte[DIGEST_PREFIX_BYTES];
            for (Path f : weights) {
                md.update(f.getFileName().toString().getBytes(StandardCharsets.UTF_8));
                try (var in = Files.newInputStream(f)) {
                    int n = in.readNBytes(buf, 0, buf.length);
                    md.update(buf, 0, n);
                }
            }
            return java.util.HexFormat.of().formatHex(md.digest(), 0, 8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the checkpoint in " + dir + ": " + e.getMessage(), e);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    /**
     * Encodes text with the checkpoint's tokenizer ({@link HfTokenizer}): a beginning-of-sequence token
     * first where the tokenizer adds one (Llama, Mistral; not Qwen2), unless the text starts with it
     * (a chat template that writes it).
     */
    public int[] encode(String text) {
        return tokenizer.encode(text);
    }

    /**
     * Decodes generated tokens to text in one go, special tokens skipped (a stream decodes the whole
     * output so far and sends what is new, so characters spanning tokens come out whole).
     *
     * @throws IllegalArgumentException for a negative token id
     */
    public String decode(int[] tokens, int count) {
        return tokenizer.decode(tokens, count);
    }

    /** The tokenizer's kind, e.g. {@code byte-level BPE} ({@link HfTokenizer#kind()}). */
    public String tokenizerKind() {
        return tokenizer.kind();
    }

    /**
     * Renders chat messages through the tokenizer config's chat template, with the generation prompt.
     *
     * @param messages role and content pairs, in order
     * @return the prompt text, or empty when the model has no chat template
     */
    public Optional<String> applyChatTemplate(List<String[]> messages) {
        Optional<PromptSupport> ps = model.promptSupport();
        if (ps.isEmpty()) {
            return Optional.empty();
        }
        PromptSupport.Builder b = ps.get().builder();
        for (String[] m : messages) {
            switch (m[0]) {
                case "system" -> b.addSystemMessage(m[1]);
                case "assistant" -> b.addAssistantMessage(m[1]);
                case "user" -> b.addUserMessage(m[1]);
                default -> throw new IllegalArgumentException("unknown chat role '" + m[0] + "'");
            }
        }
        b.addGenerationPrompt(true);
        PromptContext ctx = b.build();
        return Optional.of(ctx.getPrompt());
    }

    @Override
    public void close() {
        try {
            model.close();
        } finally {
            closeQuietly(weights);
            deleteTree(work);
        }
    }

    @Override
    public String toString() {
        return "JlamaModel[" + kvLayout() + "]";
    }
}
