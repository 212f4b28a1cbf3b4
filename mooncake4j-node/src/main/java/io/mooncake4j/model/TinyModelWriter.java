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
 * Writes a small random-weight Llama checkpoint in the Hugging Face layout ({@code config.json},
 * {@code model.safetensors}, {@code tokenizer.json}, {@code tokenizer_config.json} with a chat
 * template), deterministically from a seed: the same seed and shape give the same bytes. No
 * checkpoint can be downloaded where the tests and the demo run, so the project makes its own.
 *
 * <p>The default shape keeps every kernel path honest at a size that loads in milliseconds: a
 * head dimension of 32 (Jlama's BF16 kernels work in 32-lane chunks), 4 query heads over 2 KV heads
 * (GQA is exercised), 2 layers. The tokenizer is a character-level BPE vocabulary (printable ASCII
 * and newline, plus common English bigrams as merges) that Jlama's Llama tokenizer reads; the
 * weights are F32 (the working dtype, F32 or BF16, is chosen when the model is loaded).
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

    /** Token ids of the special tokens. */
    static final int UNK = 0;
    static final int BOS = 1;
    static final int EOS = 2;

    /** Bigram merges, most frequent English pairs first (the merge rank is the index). */
    private static final String[] BIGRAMS = {
        "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of", "ed",
        "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co",
        "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "li", "ch", "ll", "be", "ma", "si",
        "om", "ur", "ca", "el", "ta", "la", "ns", "di", "fo", "ho", "pe", "ec", "pr", "no", "ct", "us",
        "ac", "ot", "il", "tr", "ly", "nc", "et", "ut", "ss", "so", "rs", "un", "lo", "wa", "ge", "ie",
        "wh", "ee", "wi", "em", "ad", "ol", "rt", "po", "we", "na", "ul", "ni", "ts", "mo", "ow", "pa"};

    private TinyModelWriter() {}

    /** The vocabulary, id order: specials, newline, printable ASCII, bigrams. */
    static List<String> vocabulary() {
        List<String> v = new ArrayList<>();
        v.add("<unk>");
        v.add("<s>");
        v.add("</s>");
        v.add("\n");
        for (char c = 0x20; c < 0x7f; c++) {
            v.add(Character.toString(c));
        }
        v.addAll(List.of(BIGRAMS));
        return v;
    }

    /**
     * Writes the checkpoint into {@code dir} (created if missing; files of the same name replaced).
     *
     * @return the files written
     * @throws UncheckedIOException when a file cannot be written
     */
    public static List<Path> write(Path dir, Shape shape) {
        try {
            Files.createDirectories(dir);
            List<String> vocab = vocabulary();
            List<Path> out = new ArrayList<>();
            out.add(writeString(dir.resolve("config.json"), config(shape, vocab.size())));
            out.add(writeString(dir.resolve("tokenizer.json"), tokenizer(vocab)));
            out.add(writeString(dir.resolve("tokenizer_config.json"), tokenizerConfig()));
            out.add(writeWeights(dir.resolve("model.safetensors"), shape, vocab.size()));
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the model into " + dir + ": " + e.getMessage(), e);
        }
    }

    private static Path writeString(Path p, String s) throws IOException {
        Files.writeString(p, s, StandardCharsets.UTF_8);
        return p;
    }

    private static String config(Shape s, int vocab) {
        return String.format(Locale.ROOT, """
                {
                  "architectures": ["LlamaForCausalLM"],
                  "model_type": "llama",
                  "hidden_size": %d,
                  "intermediate_size": %d,
                  "num_attention_heads": %d,
                  "num_key_value_heads": %d,
                  "num_hidden_layers": %d,
                  "max_position_embeddings": %d,
                  "rms_norm_eps": 1e-05,
                  "vocab_size": %d,
                  "bos_token_id": %d,
                  "eos_token_id": %d,
                  "hidden_act": "silu",
                  "rope_theta": 10000.0,
                  "tie_word_embeddings": false,
                  "torch_dtype": "float32",
                  "mooncake4j_seed": %d
                }
                """, s.hidden(), s.intermediate(), s.heads(), s.kvHeads(), s.layers(), s.context(), vocab, BOS, EOS,
                s.seed());
    }

    private static String tokenizer(List<String> vocab) {
        StringBuilder b = new StringBuilder();
        b.append("{\n  \"version\": \"1.0\",\n  \"added_tokens\": [\n");
        for (int i = 0; i <= EOS; i++) {
            b.append(String.format(Locale.ROOT,
                    "    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                            + "\"normalized\": false, \"special\": true}%s\n",
                    i, quote(vocab.get(i)), i < EOS ? "," : ""));
        }
        b.append("  ],\n  \"normalizer\": null,\n  \"pre_tokenizer\": null,\n  \"model\": {\n");
        b.append("    \"type\": \"BPE\",\n    \"unk_token\": \"<unk>\",\n    \"fuse_unk\": false,\n");
        b.append("    \"byte_fallback\": false,\n    \"vocab\": {\n");
        for (int i = 0; i < vocab.size(); i++) {
            b.append("      ").append(quote(vocab.get(i))).append(": ").append(i)
                    .append(i + 1 < vocab.size() ? ",\n" : "\n");
        }
        b.append("    },\n    \"merges\": [\n");
        for (int i = 0; i < BIGRAMS.length; i++) {
            String m = BIGRAMS[i];
            b.append("      ").append(quote(m.charAt(0) + " " + m.charAt(1))).append(i + 1 < BIGRAMS.length ? ",\n" : "\n");
        }
        b.append("    ]\n  }\n}\n");
        return b.toString();
    }

    private static String tokenizerConfig() {
        String template = "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
                + "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";
        return "{\n  \"bos_token\": \"<s>\",\n  \"eos_token\": \"</s>\",\n  \"unk_token\": \"<unk>\",\n"
                + "  \"legacy\": false,\n  \"model_max_length\": 512,\n  \"chat_template\": " + quote(template) + "\n}\n";
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
    private static Map<String, int[]> tensors(Shape s, int vocab) {
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
            t.put(p + "self_attn.o_proj.weight", new int[] {s.hidden(), s.hidden()});
            t.put(p + "post_attention_layernorm.weight", new int[] {s.hidden()});
            t.put(p + "mlp.gate_proj.weight", new int[] {s.intermediate(), s.hidden()});
            t.put(p + "mlp.up_proj.weight", new int[] {s.intermediate(), s.hidden()});
            t.put(p + "mlp.down_proj.weight", new int[] {s.hidden(), s.intermediate()});
        }
        t.put("model.norm.weight", new int[] {s.hidden()});
        t.put("lm_head.weight", new int[] {vocab, s.hidden()});
        return t;
    }

    /**
     * safetensors: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
     * shape and byte range, then the tensors' bytes back to back.
     */
    private static Path writeWeights(Path file, Shape s, int vocab) throws IOException {
        Map<String, int[]> tensors = tensors(s, vocab);
        StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        long offset = 0;
        for (Map.Entry<String, int[]> e : tensors.entrySet()) {
            long bytes = 4L * elements(e.getValue());
            h.append(',').append(quote(e.getKey())).append(":{\"dtype\":\"F32\",\"shape\":[");
            int[] dims = e.getValue();
            for (int i = 0; i < dims.length; i++) {
                h.append(i == 0 ? "" : ",").append(dims[i]);
            }
            h.append("],\"data_offsets\":[").append(offset).append(',').append(offset + bytes).append("]}");
            offset += bytes;
        }
        h.append('}');
        while ((h.length() + 8) % 8 != 0) {
            h.append(' '); // the data starts 8-byte aligned
        }
        byte[] header = h.toString().getBytes(StandardCharsets.UTF_8);
        SplittableRandom rnd = new SplittableRandom(s.seed());
        try (OutputStream out = Files.newOutputStream(file)) {
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length);
            out.write(len.array());
            out.write(header);
            for (Map.Entry<String, int[]> e : tensors.entrySet()) {
                int[] dims = e.getValue();
                boolean norm = dims.length == 1;
                // fan-in scaled uniform weights keep activations O(1) through the layers, so the logits
                // separate and greedy decoding has no near-ties; norms start at 1
                float scale = norm ? 0 : (float) (Math.sqrt(3.0 / dims[dims.length - 1]));
                if (e.getKey().equals("model.embed_tokens.weight")) {
                    scale = 1f;
                }
                ByteBuffer buf = ByteBuffer.allocate(4 * (int) elements(dims)).order(ByteOrder.LITTLE_ENDIAN);
                for (long i = 0, n = elements(dims); i < n; i++) {
                    float v = norm ? 1f : (float) ((rnd.nextDouble() * 2 - 1) * scale);
                    buf.putFloat(v);
                }
                out.write(buf.array());
            }
        }
        return file;
    }

    private static long elements(int[] dims) {
        long n = 1;
        for (int d : dims) {
            n *= d;
        }
        return n;
    }
}
