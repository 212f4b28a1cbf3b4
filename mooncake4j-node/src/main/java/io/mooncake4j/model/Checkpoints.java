package io.mooncake4j.model;

import io.mooncake4j.internal.json.Json;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * What a model directory must hold before Jlama sees it, checked up front so that an unsupported
 * checkpoint stops start-up with an {@link IllegalArgumentException} naming the feature (never a
 * stack trace from inside Jlama, nor a model that loads and computes something else than the
 * checkpoint's authors meant):
 *
 * <ul>
 *   <li>a directory (the node does not download models) with {@code config.json}, {@code tokenizer.json}
 *       and safetensors weights: {@code model.safetensors}, or {@code model.safetensors.index.json} and
 *       every shard it names;</li>
 *   <li>{@code model_type} {@code llama}, {@code mistral} or {@code qwen2}, {@code hidden_act} {@code silu},
 *       no quantization, no RoPE scaling but {@code linear} (Llama), no attention or MLP biases on a Llama,
 *       no sliding window on Qwen2, a {@code head_dim} equal to hidden / heads (but Mistral);</li>
 *   <li>weights in F32, F16 or BF16 (not a mix of F16 and BF16), with headers under the 1 MiB Jlama reads.</li>
 * </ul>
 *
 * Stateless.
 */
final class Checkpoints {

    /** The architectures ({@code model_type}) this node runs: Jlama's decoder-only Llama family. */
    static final Set<String> SUPPORTED = Set.of("llama", "mistral", "qwen2");
    /** Weight dtypes Jlama loads as they are (F16 is widened to F32). */
    static final Set<String> DTYPES = Set.of("F32", "F16", "BF16");
    /** The bytes of each weights file Jlama reads for its header. */
    private static final int JLAMA_HEADER_BYTES = 1 << 20;

    private Checkpoints() {}

    /**
     * What the checks found.
     *
     * @param modelType     the {@code model_type}, lower case
     * @param config        {@code config.json}
     * @param weightsDType  the weights' dtype ({@code F32}, {@code F16} or {@code BF16}; the most common one)
     * @param weightFiles   the safetensors files, in name order
     * @param slidingWindow the sliding window of a Mistral config that sets one, else 0
     */
    record Checked(String modelType, Map<String, Object> config, String weightsDType, List<Path> weightFiles,
            int slidingWindow) {}

    /** Checks the directory; see the class comment. */
    static Checked check(Path dir) {
        if (!Files.exists(dir)) {
            throw new IllegalArgumentException("model directory " + dir + " does not exist: this node does not download "
                    + "models; download the checkpoint first (e.g. `huggingface-cli download ORG/NAME --local-dir DIR`) "
                    + "and pass DIR, or write a test model with `bin/mooncake4j make-model --tiny DIR`");
        }
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException("model " + dir + " is a file, not a model directory (pass the directory"
                    + " that holds config.json, tokenizer.json and the safetensors weights)");
        }
        for (String f : List.of("config.json", "tokenizer.json")) {
            if (!Files.isRegularFile(dir.resolve(f))) {
                String hint = f.equals("tokenizer.json") && Files.isRegularFile(dir.resolve("tokenizer.model"))
                        ? " (a SentencePiece tokenizer.model alone is not supported: the Hugging Face tokenizer.json is "
                                + "needed)" : "";
                throw new IllegalArgumentException("model directory " + dir + " is incomplete: no " + f + hint);
            }
        }
        Map<String, Object> config = readObject(dir.resolve("config.json"));
        String type = checkConfig(dir, config);
        List<Path> weights = weightFiles(dir);
        String dtype = checkWeights(weights);
        int window = type.equals("mistral") && config.get("sliding_window") instanceof Number w ? w.intValue() : 0;
        return new Checked(type, config, dtype, weights, window);
    }

    /** {@code config.json}'s {@code eos_token_id}: one id, a list, or none. */
    static List<Integer> configEos(Map<String, Object> config) {
        return ids(config.get("eos_token_id"), "config.json");
    }

    private static List<Integer> ids(Object eos, String where) {
        List<Integer> out = new ArrayList<>();
        for (Object o : eos instanceof List<?> l ? l : eos == null ? List.of() : List.of(eos)) {
            if (!(o instanceof Number n) || n.longValue() < 0 || n.longValue() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException(where + ": eos_token_id must be token ids, got " + eos);
            }
            out.add(n.intValue());
        }
        return out;
    }

    /**
     * The {@code eos_token_id} of {@code generation_config.json} (one id or a list), empty when the file or
     * the key is absent.
     *
     * @throws IllegalArgumentException when the file is not JSON or an id is not a non-negative integer
     */
    static List<Integer> generationEos(Path dir) {
        Path f = dir.resolve("generation_config.json");
        if (!Files.isRegularFile(f)) {
            return List.of();
        }
        return ids(readObject(f).get("eos_token_id"), f.toString());
    }

    private static Map<String, Object> readObject(Path f) {
        try {
            return Json.parseObject(Files.readString(f, StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    private static String checkConfig(Path dir, Map<String, Object> c) {
        Path file = dir.resolve("config.json");
        if (!(c.get("model_type") instanceof String mt)) {
            throw new IllegalArgumentException(file + " has no model_type");
        }
        String type = mt.toLowerCase(Locale.ROOT);
        if (!SUPPORTED.contains(type)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "model architecture '%s' is not supported (supported: %s)", mt, String.join(", ", new TreeSet<>(
                            SUPPORTED))));
        }
        if (c.get("quantization_config") instanceof Map<?, ?> q) {
            throw new IllegalArgumentException("a quantized checkpoint (quantization_config, quant_method '"
                    + q.get("quant_method") + "') is not supported: use F32, F16 or BF16 weights");
        }
        for (String k : List.of("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                "num_hidden_layers", "max_position_embeddings", "vocab_size")) {
            if (!(c.get(k) instanceof Number n) || n.longValue() <= 0 || n.longValue() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException(file + ": " + k + " must be a positive integer, got " + c.get(k));
            }
        }
        Object act = c.getOrDefault("hidden_act", "silu");
        if (!"silu".equals(act)) {
            throw new IllegalArgumentException("hidden_act '" + act + "' is not supported for " + type
                    + " (supported: silu)");
        }
        if (c.get("rope_scaling") instanceof Map<?, ?> rs) {
            Object kind = rs.get("rope_type") != null ? rs.get("rope_type") : rs.get("type");
            boolean ok = "default".equals(kind) || (type.equals("llama") && "linear".equals(kind));
            if (!ok) {
                throw new IllegalArgumentException("rope_scaling type '" + kind + "' is not supported for " + type
                        + " (Jlama 0.8.4 applies " + (type.equals("llama") ? "none or linear" : "none") + ")");
            }
        }
        if (type.equals("llama")) {
            for (String k : List.of("attention_bias", "mlp_bias")) {
                if (Boolean.TRUE.equals(c.get(k))) {
                    throw new IllegalArgumentException(k + " is not supported for llama (Jlama 0.8.4 loads no biases)");
                }
            }
        }
        if (type.equals("qwen2") && Boolean.TRUE.equals(c.get("use_sliding_window"))) {
            throw new IllegalArgumentException("use_sliding_window is not supported for qwen2 (Jlama 0.8.4 attends to "
                    + "the whole context)");
        }
        int hidden = ((Number) c.get("hidden_size")).intValue();
        int heads = ((Number) c.get("num_attention_heads")).intValue();
        if (!type.equals("mistral") && c.get("head_dim") instanceof Number hd && hd.intValue() * heads != hidden) {
            throw new IllegalArgumentException("head_dim " + hd + " other than hidden_size / num_attention_heads ("
                    + hidden / heads + ") is not supported for " + type);
        }
        configEos(c); // ids, or refused
        return type;
    }

    /** The weights files: the index's shards (each must exist) or model.safetensors. */
    private static List<Path> weightFiles(Path dir) {
        Path index = dir.resolve("model.safetensors.index.json");
        if (Files.isRegularFile(index)) {
            Map<String, Object> idx = readObject(index);
            if (!(idx.get("weight_map") instanceof Map<?, ?> wm) || wm.isEmpty()) {
                throw new IllegalArgumentException(index + " has no weight_map");
            }
            Set<String> names = new LinkedHashSet<>();
            for (Object f : wm.values()) {
                String name = String.valueOf(f);
                Path p = dir.resolve(name).normalize();
                if (!p.getParent().equals(dir.normalize()) || !name.endsWith(".safetensors")) {
                    throw new IllegalArgumentException(index + " names a weights file outside the directory: " + name);
                }
                if (!Files.isRegularFile(p)) {
                    throw new IllegalArgumentException("model directory " + dir + " is incomplete: the shard " + name
                            + " named by model.safetensors.index.json is missing");
                }
                names.add(name);
            }
            return names.stream().sorted().map(dir::resolve).toList();
        }
        if (Files.isRegularFile(dir.resolve("model.safetensors"))) {
            return List.of(dir.resolve("model.safetensors"));
        }
        String other = "";
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                String n = f.getFileName().toString();
                if (n.endsWith(".bin") || n.endsWith(".pt") || n.endsWith(".pth")) {
                    other = " (PyTorch pickle weights such as " + n + " are not supported: safetensors only)";
                } else if (n.endsWith(".gguf")) {
                    other = " (GGUF weights such as " + n + " are not supported: safetensors only)";
                }
            }
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot list " + dir + ": " + e.getMessage(), e);
        }
        throw new IllegalArgumentException("model directory " + dir
                + " is incomplete: no model.safetensors (nor model.safetensors.index.json)" + other);
    }

    /** Reads each file's safetensors header; returns the most common dtype. */
    private static String checkWeights(List<Path> files) {
        Map<String, Integer> counts = new java.util.TreeMap<>();
        for (Path f : files) {
            Map<String, Object> header = header(f);
            for (Map.Entry<String, Object> e : header.entrySet()) {
                if (e.getKey().equals("__metadata__") || !(e.getValue() instanceof Map<?, ?> t)) {
                    continue;
                }
                String dt = String.valueOf(t.get("dtype"));
                if (!DTYPES.contains(dt)) {
                    throw new IllegalArgumentException(String.format(Locale.ROOT,
                            "weights dtype %s (tensor %s in %s) is not supported (supported: BF16, F16, F32)", dt,
                            e.getKey(), f.getFileName()));
                }
                counts.merge(dt, 1, Integer::sum);
            }
        }
        if (counts.containsKey("F16") && counts.containsKey("BF16")) {
            throw new IllegalArgumentException("weights that mix F16 and BF16 tensors are not supported " + counts);
        }
        if (counts.isEmpty()) {
            throw new IllegalArgumentException("the safetensors files hold no tensors: " + files);
        }
        List<Map.Entry<String, Integer>> l = new ArrayList<>(counts.entrySet());
        l.sort(Map.Entry.<String, Integer>comparingByValue().reversed());
        return l.getFirst().getKey();
    }

    private static Map<String, Object> header(Path f) {
        try (InputStream in = Files.newInputStream(f)) {
            byte[] len = in.readNBytes(8);
            if (len.length < 8) {
                throw new IllegalArgumentException(f + " is not a safetensors file (shorter than its header length)");
            }
            long n = ByteBuffer.wrap(len).order(ByteOrder.LITTLE_ENDIAN).getLong();
            if (n <= 0 || n + 8 > JLAMA_HEADER_BYTES) {
                throw new IllegalArgumentException(String.format(Locale.ROOT, "%s has a safetensors header of %d bytes;"
                        + " Jlama 0.8.4 reads headers of at most %d bytes", f, n, JLAMA_HEADER_BYTES - 8));
            }
            byte[] h = in.readNBytes((int) n);
            if (h.length < n) {
                throw new IllegalArgumentException(f + " is truncated inside its safetensors header");
            }
            return Json.parseObject(new String(h, StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + f + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            if (e instanceof IllegalArgumentException iae && !(e instanceof io.mooncake4j.internal.json.JsonException)) {
                throw iae;
            }
            throw new IllegalArgumentException(f + " has a malformed safetensors header: " + e.getMessage(), e);
        }
    }
}
