package io.mooncake4j.model;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Writes a small random-weight checkpoint in the Hugging Face layout ({@code config.json}, weights in
 * safetensors, {@code tokenizer.json}, {@code tokenizer_config.json} with a chat template),
 * deterministically from a seed: the same seed, shape and {@link Variant} give the same bytes. No
 * checkpoint can be downloaded where the tests and the demo run, so the project makes its own, in
 * each of the forms a download comes in: {@link Variant} picks the architecture (Llama, Qwen2 with
 * q/k/v biases, Mistral), the weights' dtype (F32, F16, BF16), shards with an index, tied embeddings
 * and the tokenizer ({@link TokenizerKind}: character-level, Llama 3 or Qwen2 byte-level BPE,
 * Llama 2 / Mistral SentencePiece-style byte fallback).
 *
 * <p>The default shape keeps every kernel path honest at a size that loads in milliseconds: a
 * head dimension of 32 (Jlama's BF16 kernels work in 32-lane chunks), 4 query heads over 2 KV heads
 * (GQA is exercised), 2 layers. The default variant is a Llama with F32 weights in one file and a
 * character-level BPE vocabulary (printable ASCII and newline, plus common English bigrams as merges);
 * the working dtype (F32 or BF16) is chosen when the model is loaded.
 *
 * <p>Stateless; {@link #write} may be called from any thread.
 */
public final class TinyModelWriter {

    /**
     * The checkpoint's shape.
     *
     * @param hidden       {@code hidden_size}
     * @param layers       {@code num_hidden_layers}
     * @param heads        {@code num_attention_heads}
     * @param kvHeads      {@code num_key_value_heads}
     * @param intermediate {@code intermediate_size}
     * @param context      {@code max_position_embeddings}
     * @param seed         the seed of every weight
     */
    public record Shape(int hidden, int layers, int heads, int kvHeads, int intermediate, int context, long seed) {
        public Shape {
            if (hidden <= 0 || layers <= 0 || heads <= 0 || kvHeads <= 0 || intermediate <= 0 || context <= 0) {
                throw new IllegalArgumentException("model dimensions must be positive");
            }
            if (hidden % heads != 0 || heads % kvHeads != 0) {
                throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "hidden %d must split into %d heads, and the heads into %d KV heads", hidden, heads, kvHeads));
            }
            if ((hidden / heads) % 32 != 0) {
                throw new IllegalArgumentException("the head dimension must be a multiple of 32 (BF16 kernels), got "
                        + hidden / heads);
            }
        }

        /** Hidden 128, 2 layers, 4 heads over 2 KV heads (head dimension 32), MLP 256, context 512, seed 25. */
        public static Shape tiny() {
            return new Shape(128, 2, 4, 2, 256, 512, 25);
        }

        /** The same shape with another seed (another model of identical KV layout). */
        public Shape withSeed(long s) {
            return new Shape(hidden, layers, heads, kvHeads, intermediate, context, s);
        }

        /** The same seed with {@code n} KV heads (another KV layout). */
        public Shape withKvHeads(int n) {
            return new Shape(hidden, layers, heads, n, intermediate, context, seed);
        }
    }

    /** Token ids of the character-level tokenizer's special tokens. */
    static final int UNK = 0;
    static final int BOS = 1;
    static final int EOS = 2;

    /** The architecture a checkpoint declares ({@code model_type}) and the tensors that come with it. */
    public enum Arch {
        /** {@code LlamaForCausalLM}. */
        LLAMA("llama", "LlamaForCausalLM"),
        /** {@code Qwen2ForCausalLM}: q/k/v projections with biases, rope theta 1e6. */
        QWEN2("qwen2", "Qwen2ForCausalLM"),
        /** {@code MistralForCausalLM}: an explicit {@code head_dim}, no sliding window. */
        MISTRAL("mistral", "MistralForCausalLM");

        final String modelType;
        final String className;

        Arch(String modelType, String className) {
            this.modelType = modelType;
            this.className = className;
        }
    }

    /** The tokenizer a checkpoint ships ({@code tokenizer.json} and {@code tokenizer_config.json}). */
    public enum TokenizerKind {
        /** Characters (printable ASCII, newline) and English bigram merges; BOS added. */
        CHAR,
        /** Llama 3's byte-level BPE: a Split regex, ByteLevel, merges, BOS from the post-processor. */
        LLAMA3,
        /** Qwen2's byte-level BPE: NFC, Split regex (digits one by one), ByteLevel, no BOS. */
        QWEN2,
        /** Llama 2 / Mistral SentencePiece-style BPE: ▁ for spaces, {@code <0xNN>} byte fallback, BOS added. */
        SENTENCEPIECE
    }

    /**
     * How the checkpoint is stored.
     *
     * @param arch      the architecture
     * @param dtype     the weights' dtype: {@code F32}, {@code F16} or {@code BF16}
     * @param shards    files the weights are split into; more than one writes {@code model.safetensors.index.json}
     * @param tied      tied embeddings: no {@code lm_head.weight}, {@code tie_word_embeddings} true
     * @param tokenizer the tokenizer
     */
    public record Variant(Arch arch, String dtype, int shards, boolean tied, TokenizerKind tokenizer) {
        public Variant {
            if (!List.of("F32", "F16", "BF16").contains(dtype)) {
                throw new IllegalArgumentException("the weights' dtype must be F32, F16 or BF16, got " + dtype);
            }
            if (shards < 1 || shards > 99) {
                throw new IllegalArgumentException("shards must be in 1..99, got " + shards);
            }
        }

        /** Llama, F32, one file, an lm_head, the character-level tokenizer (the tiny model). */
        public static Variant defaults() {
            return new Variant(Arch.LLAMA, "F32", 1, false, TokenizerKind.CHAR);
        }

        /** What a Llama 3 download looks like: BF16, sharded, tied embeddings, byte-level BPE. */
        public static Variant llama3() {
            return new Variant(Arch.LLAMA, "BF16", 2, true, TokenizerKind.LLAMA3);
        }

        /** What a Qwen2 download looks like (F16 here, to cover that dtype): biases, tied, byte-level BPE, no BOS. */
        public static Variant qwen2() {
            return new Variant(Arch.QWEN2, "F16", 2, true, TokenizerKind.QWEN2);
        }

        /** What a Mistral download looks like: BF16, SentencePiece-style byte fallback, an lm_head. */
        public static Variant mistral() {
            return new Variant(Arch.MISTRAL, "BF16", 3, false, TokenizerKind.SENTENCEPIECE);
        }

        /** What a Llama 2 download looks like: F16, one file, SentencePiece-style byte fallback. */
        public static Variant llama2() {
            return new Variant(Arch.LLAMA, "F16", 1, false, TokenizerKind.SENTENCEPIECE);
        }
    }

    private TinyModelWriter() {}

    /** The character-level tokenizer's vocabulary, id order: specials, newline, printable ASCII, bigrams. */
    static List<String> vocabulary() {
        return TinyTokenizers.charVocabulary();
    }

    /** As {@link #write(Path, Shape, Variant)} with {@link Variant#defaults()}. */
    public static List<Path> write(Path dir, Shape shape) {
        return write(dir, shape, Variant.defaults());
    }

    /**
     * Writes the checkpoint into {@code dir} (created if missing; files of the same name replaced).
     *
     * @return the files written
     * @throws UncheckedIOException when a file cannot be written
     */
    public static List<Path> write(Path dir, Shape shape, Variant variant) {
        try {
            Files.createDirectories(dir);
            TinyTokenizers.Files tok = TinyTokenizers.of(variant.tokenizer());
            List<Path> out = new ArrayList<>();
            out.add(writeString(dir.resolve("config.json"), config(shape, variant, tok)));
            out.add(writeString(dir.resolve("tokenizer.json"), tok.tokenizer()));
            out.add(writeString(dir.resolve("tokenizer_config.json"), tok.tokenizerConfig()));
            if (!tok.generationEos().isEmpty()) {
                Map<String, Object> gen = new LinkedHashMap<>();
                gen.put("bos_token_id", tok.bos());
                gen.put("eos_token_id", tok.generationEos());
                out.add(writeString(dir.resolve("generation_config.json"),
                        io.mooncake4j.internal.json.Json.write(gen) + "\n"));
            }
            out.addAll(writeWeights(dir, shape, variant, tok.vocabSize()));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the model into " + dir + ": " + e.getMessage(), e);
        }
    }

    private static Path writeString(Path p, String s) throws IOException {
        Files.writeString(p, s, StandardCharsets.UTF_8);
        return p;
    }

    private static String config(Shape s, Variant v, TinyTokenizers.Files tok) {
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("architectures", List.of(v.arch().className));
        c.put("model_type", v.arch().modelType);
        c.put("hidden_size", s.hidden());
        c.put("intermediate_size", s.intermediate());
        c.put("num_attention_heads", s.heads());
        c.put("num_key_value_heads", s.kvHeads());
        c.put("num_hidden_layers", s.layers());
        if (v.arch() == Arch.MISTRAL) {
            c.put("head_dim", s.hidden() / s.heads());
            c.put("sliding_window", null);
        }
        if (v.arch() == Arch.QWEN2) {
            c.put("use_sliding_window", false);
            c.put("sliding_window", s.context());
            c.put("max_window_layers", s.layers());
        }
        c.put("max_position_embeddings", s.context());
        c.put("rms_norm_eps", 1e-05);
        c.put("vocab_size", tok.vocabSize());
        c.put("bos_token_id", tok.bos());
        c.put("eos_token_id", tok.eos().size() == 1 ? tok.eos().getFirst() : tok.eos());
        c.put("hidden_act", "silu");
        c.put("rope_theta", v.arch() == Arch.QWEN2 ? 1000000.0 : 10000.0);
        c.put("tie_word_embeddings", v.tied());
        c.put("torch_dtype", switch (v.dtype()) {
            case "F16" -> "float16";
            case "BF16" -> "bfloat16";
            default -> "float32";
        });
        c.put("mooncake4j_seed", s.seed());
        return io.mooncake4j.internal.json.Json.write(c) + "\n";
    }

    /** A JSON string literal. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** Tensor names and shapes in file order. */
    private static Map<String, int[]> tensors(Shape s, Variant v, int vocab) {
        int head = s.hidden() / s.heads();
        int kv = s.kvHeads() * head;
        Map<String, int[]> t = new LinkedHashMap<>();
        t.put("model.embed_tokens.weight", new int[] {vocab, s.hidden()});
        for (int l = 0; l < s.layers(); l++) {
            String p = "model.layers." + l + ".";
            t.put(p + "input_layernorm.weight", new int[] {s.hidden()});
            t.put(p + "self_attn.q_proj.weight", new int[] {s.hidden(), s.hidden()});
            t.put(p + "self_attn.k_proj.weight", new int[] {kv, s.hidden()});
            t.put(p + "self_attn.v_proj.weight", new int[] {kv, s.hidden()});
            if (v.arch() == Arch.QWEN2) {
                t.put(p + "self_attn.q_proj.bias", new int[] {s.hidden()});
                t.put(p + "self_attn.k_proj.bias", new int[] {kv});
                t.put(p + "self_attn.v_proj.bias", new int[] {kv});
            }
            t.put(p + "self_attn.o_proj.weight", new int[] {s.hidden(), s.hidden()});
            t.put(p + "post_attention_layernorm.weight", new int[] {s.hidden()});
            t.put(p + "mlp.gate_proj.weight", new int[] {s.intermediate(), s.hidden()});
            t.put(p + "mlp.up_proj.weight", new int[] {s.intermediate(), s.hidden()});
            t.put(p + "mlp.down_proj.weight", new int[] {s.hidden(), s.intermediate()});
        }
        t.put("model.norm.weight", new int[] {s.hidden()});
        if (!v.tied()) {
            t.put("lm_head.weight", new int[] {vocab, s.hidden()});
        }
        return t;
    }

    /**
     * safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
     * shape and byte range, then the tensors' bytes back to back. With several shards, the tensors are
     * split in file order into {@code model-0000i-of-0000n.safetensors} and
     * {@code model.safetensors.index.json} maps each tensor to its file (Hugging Face's layout).
     */
    private static List<Path> writeWeights(Path dir, Shape s, Variant v, int vocab) throws IOException {
        Map<String, int[]> tensors = tensors(s, v, vocab);
        int width = switch (v.dtype()) {
            case "F32" -> 4;
            default -> 2;
        };
        // the weights are drawn in file order from one generator whatever the sharding and dtype
        SplittableRandom rnd = new SplittableRandom(s.seed());
        List<String> names = new ArrayList<>(tensors.keySet());
        List<Path> out = new ArrayList<>();
        Map<String, Object> weightMap = new LinkedHashMap<>();
        long total = 0;
        int n = Math.min(v.shards(), names.size());
        for (int shard = 0; shard < n; shard++) {
            List<String> mine = names.subList(shard * names.size() / n, (shard + 1) * names.size() / n);
            String fileName = n == 1 ? "model.safetensors"
                    : String.format(Locale.ROOT, "model-%05d-of-%05d.safetensors", shard + 1, n);
            StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
            long offset = 0;
            for (String name : mine) {
                int[] dims = tensors.get(name);
                long bytes = width * elements(dims);
                h.append(',').append(quote(name)).append(":{\"dtype\":\"").append(v.dtype()).append("\",\"shape\":[");
                for (int i = 0; i < dims.length; i++) {
                    h.append(i == 0 ? "" : ",").append(dims[i]);
                }
                h.append("],\"data_offsets\":[").append(offset).append(',').append(offset + bytes).append("]}");
                offset += bytes;
                weightMap.put(name, fileName);
            }
            total += offset;
            h.append('}');
            while ((h.length() + 8) % 8 != 0) {
                h.append(' '); // the data starts 8-byte aligned
            }
            byte[] header = h.toString().getBytes(StandardCharsets.UTF_8);
            Path file = dir.resolve(fileName);
            try (OutputStream o = Files.newOutputStream(file)) {
                ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length);
                o.write(len.array());
                o.write(header);
                for (String name : mine) {
                    o.write(values(name, tensors.get(name), v.dtype(), rnd));
                }
            }
            out.add(file);
        }
        if (n > 1) {
            Map<String, Object> index = new LinkedHashMap<>();
            index.put("metadata", Map.of("total_size", total));
            index.put("weight_map", weightMap);
            out.add(writeString(dir.resolve("model.safetensors.index.json"),
                    io.mooncake4j.internal.json.Json.write(index) + "\n"));
        }
        return out;
    }

    /** One tensor's little-endian bytes in {@code dtype}. */
    private static byte[] values(String name, int[] dims, String dtype, SplittableRandom rnd) {
        int width = dtype.equals("F32") ? 4 : 2;
        boolean half = dtype.equals("F16");
        boolean norm = name.endsWith("norm.weight");
        boolean bias = name.endsWith(".bias");
        // fan-in scaled uniform weights keep activations O(1) through the layers, so the logits
        // separate and greedy decoding has no near-ties; norms start at 1, biases are small
        float scale = norm ? 0 : bias ? 0.1f : (float) (Math.sqrt(3.0 / dims[dims.length - 1]));
        if (name.equals("model.embed_tokens.weight")) {
            scale = 1f;
        }
        int count = (int) elements(dims);
        ByteBuffer buf = ByteBuffer.allocate(width * count).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < count; i++) {
            float f = norm ? 1f : (float) ((rnd.nextDouble() * 2 - 1) * scale);
            if (width == 4) {
                buf.putFloat(f);
            } else {
                buf.putShort(half ? Float.floatToFloat16(f) : bfloat16(f));
            }
        }
        return buf.array();
    }

    /** A float rounded to the nearest bfloat16 (ties to even): the upper half of its bits. */
    static short bfloat16(float f) {
        int bits = Float.floatToRawIntBits(f);
        bits += 0x7fff + ((bits >>> 16) & 1);
        return (short) (bits >>> 16);
    }

    private static long elements(int[] dims) {
        long n = 1;
        for (int d : dims) {
            n *= d;
        }
        return n;
    }
}
