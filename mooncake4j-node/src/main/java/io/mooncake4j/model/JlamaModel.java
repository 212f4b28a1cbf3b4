package io.mooncake4j.model;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.model.ModelSupport;
import com.github.tjake.jlama.safetensors.Config;
import com.github.tjake.jlama.safetensors.DType;
import com.github.tjake.jlama.safetensors.prompt.PromptContext;
import com.github.tjake.jlama.safetensors.prompt.PromptSupport;

import io.mooncake4j.memory.ModelPreset;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Jlama model loaded from a Hugging Face-style directory, with what a serving node needs around
 * it: the KV shape of its blocks, a fingerprint of the KV layout, the tokenizer and the chat
 * template. The directory is checked before Jlama sees it, so a missing file or an unsupported
 * architecture is a clear {@link IllegalArgumentException}, never a stack trace from inside Jlama.
 *
 * <p>The weights are shared, read-only, by every {@link JlamaStepModel} made from this object (one
 * per engine); Jlama's kernels run on its own shared thread pool. Closing releases the weights.
 */
public final class JlamaModel implements AutoCloseable {

    /** The architectures ({@code model_type}) this node runs: Jlama's decoder-only Llama family. */
    static final Set<String> SUPPORTED = Set.of("llama", "mistral", "qwen2");

    private static final Logger LOG = LoggerFactory.getLogger(JlamaModel.class);
    private static final Pattern MODEL_TYPE = Pattern.compile("\"model_type\"\\s*:\\s*\"([^\"]*)\"");

    private final Path dir;
    private final AbstractModel model;
    private final String modelType;
    private final DType workingDType;
    private final Path work;
    private final String digest;

    private JlamaModel(Path dir, AbstractModel model, String modelType, DType workingDType, Path work, String digest) {
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
        String type = check(dir);
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
        try {
            m = ModelSupport.loadModel(dir.toFile(), work.toFile(), dtype, DType.I8, Optional.empty(), Optional.empty());
        } catch (RuntimeException e) {
            deleteTree(work);
            throw new IllegalArgumentException(String.format(Locale.ROOT, "model directory %s cannot be loaded: %s",
                    dir, rootMessage(e)), e);
        }
        Config c = m.getConfig();
        if (c.headSize % 32 != 0 && dtype == DType.BF16) {
            m.close();
            deleteTree(work);
            throw new IllegalArgumentException("BF16 needs a head dimension that is a multiple of 32, model has "
                    + c.headSize + "; use F32");
        }
        String digest;
        try {
            digest = checkpointDigest(dir);
        } catch (RuntimeException e) {
            m.close();
            deleteTree(work);
            throw e;
        }
        return new JlamaModel(dir, m, type, dtype, work, digest);
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

    /** Checks the directory's files and architecture; returns the {@code model_type}. */
    static String check(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("model directory " + dir + " does not exist (make one with "
                    + "`bin/mooncake4j make-model --tiny DIR`, or name a Hugging Face checkpoint directory)");
        }
        for (String f : List.of("config.json", "tokenizer.json")) {
            if (!Files.isRegularFile(dir.resolve(f))) {
                throw new IllegalArgumentException("model directory " + dir + " is incomplete: no " + f);
            }
        }
        if (!Files.isRegularFile(dir.resolve("model.safetensors"))
                && !Files.isRegularFile(dir.resolve("model.safetensors.index.json"))) {
            throw new IllegalArgumentException("model directory " + dir
                    + " is incomplete: no model.safetensors (nor model.safetensors.index.json)");
        }
        String config;
        try {
            config = Files.readString(dir.resolve("config.json"), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + dir.resolve("config.json") + ": " + e.getMessage(), e);
        }
        Matcher mt = MODEL_TYPE.matcher(config);
        if (!mt.find()) {
            throw new IllegalArgumentException(dir.resolve("config.json") + " has no model_type");
        }
        String type = mt.group(1).toLowerCase(Locale.ROOT);
        if (!SUPPORTED.contains(type)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "model architecture '%s' is not supported (supported: %s)", type,
                    String.join(", ", SUPPORTED.stream().sorted().toList())));
        }
        return type;
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

    /** {@code max_position_embeddings}: prompt plus output may not exceed it. */
    public int contextLength() {
        return model.getConfig().contextLength;
    }

    /** {@code vocab_size}. */
    public int vocabularySize() {
        return model.getConfig().vocabularySize;
    }

    /** The end-of-sequence token ids. */
    public List<Integer> eosTokens() {
        return model.getConfig().eosTokens;
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

    /** Encodes text, a beginning-of-sequence token first (Llama's convention). */
    public int[] encode(String text) {
        long[] ids = model.getTokenizer().encode(text);
        int bos = model.getConfig().bosToken;
        int skip = ids.length > 0 && ids[0] == bos ? 1 : 0;
        int[] out = new int[ids.length - skip + 1];
        out[0] = bos;
        for (int i = skip; i < ids.length; i++) {
            out[i - skip + 1] = Math.toIntExact(ids[i]);
        }
        return out;
    }

    /**
     * Decodes generated tokens to text in one go (Jlama's per-token decode keeps state across calls,
     * so a stream decodes the whole output so far and sends what is new).
     */
    public String decode(int[] tokens, int count) {
        long[] ids = new long[count];
        for (int i = 0; i < count; i++) {
            ids[i] = tokens[i];
        }
        synchronized (model) { // the tokenizer's byte-fallback buffer is shared state
            return model.getTokenizer().decode(ids);
        }
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
            deleteTree(work);
        }
    }

    @Override
    public String toString() {
        return "JlamaModel[" + kvLayout() + "]";
    }
}
