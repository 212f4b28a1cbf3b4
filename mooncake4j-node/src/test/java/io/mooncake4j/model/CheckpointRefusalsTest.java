package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.cli.Main;
import io.mooncake4j.internal.json.Json;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a node cannot run is refused at start-up with a message naming it, before Jlama sees the
 * checkpoint: an argument that is not a directory (the node does not download models), an
 * architecture, a weights dtype, a quantized or RoPE-scaled config, a tokenizer feature, a missing
 * shard; {@code serve} turns each into a usage error (exit 2).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CheckpointRefusalsTest {

    @TempDir
    Path dir;

    private static String refusal(Path m, String dtype) {
        return assertThrows(IllegalArgumentException.class, () -> {
            try (JlamaModel x = JlamaModel.load(m, dtype)) {
                x.kvLayout();
            }
        }).getMessage();
    }

    private static void assertContains(String text, String part) {
        assertTrue(text.contains(part), "expected \"" + part + "\" in: " + text);
    }

    private Path model(String name, TinyModelWriter.Variant v) {
        Path m = dir.resolve(name);
        TinyModelWriter.write(m, TinyModelWriter.Shape.tiny(), v);
        return m;
    }

    private static void editJson(Path f, Consumer<Map<String, Object>> edit) throws Exception {
        Map<String, Object> m = Json.parseObject(Files.readString(f));
        edit.accept(m);
        Files.writeString(f, Json.write(m));
    }

    @Test
    void aNameThatIsNotADirectoryIsNotDownloaded() throws Exception {
        String msg = refusal(Path.of("meta-llama/Llama-3.2-1B"), "F32");
        assertContains(msg, "meta-llama/Llama-3.2-1B does not exist: this node does not download models");
        assertContains(msg, "make-model");

        Path file = Files.writeString(dir.resolve("model.safetensors"), "x");
        assertContains(refusal(file, "F32"), "is a file, not a model directory");

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = Main.run(new String[] {"serve", "--model", "Qwen/Qwen2-0.5B", "--port", "0"},
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, rc, err.toString(StandardCharsets.UTF_8));
        assertContains(err.toString(StandardCharsets.UTF_8), "this node does not download models");

        // a bare name is a preset name; the refusal says a checkpoint is a directory
        err.reset();
        rc = Main.run(new String[] {"serve", "--model", "gpt2", "--port", "0"},
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, rc, err.toString(StandardCharsets.UTF_8));
        assertContains(err.toString(StandardCharsets.UTF_8), "unknown model preset 'gpt2'");
        assertContains(err.toString(StandardCharsets.UTF_8), "or a checkpoint directory (this node does not download");
    }

    @Test
    void unsupportedArchitecturesAndConfigFeatures() throws Exception {
        Path m = model("gemma", TinyModelWriter.Variant.defaults());
        editJson(m.resolve("config.json"), c -> c.put("model_type", "gemma"));
        assertContains(refusal(m, "F32"), "model architecture 'gemma' is not supported (supported: llama, mistral, qwen2)");

        m = model("gptq", TinyModelWriter.Variant.defaults());
        editJson(m.resolve("config.json"), c -> c.put("quantization_config", Map.of("quant_method", "gptq", "bits", 4)));
        assertContains(refusal(m, "F32"), "quantized checkpoint (quantization_config, quant_method 'gptq')");

        m = model("rope", TinyModelWriter.Variant.llama3());
        editJson(m.resolve("config.json"), c -> c.put("rope_scaling", Map.of("rope_type", "llama3", "factor", 32.0)));
        assertContains(refusal(m, "F32"), "rope_scaling type 'llama3' is not supported for llama");

        m = model("bias", TinyModelWriter.Variant.defaults());
        editJson(m.resolve("config.json"), c -> c.put("attention_bias", true));
        assertContains(refusal(m, "F32"), "attention_bias is not supported for llama");

        m = model("gelu", TinyModelWriter.Variant.mistral());
        editJson(m.resolve("config.json"), c -> c.put("hidden_act", "gelu"));
        assertContains(refusal(m, "F32"), "hidden_act 'gelu' is not supported for mistral");

        m = model("vocab", TinyModelWriter.Variant.llama3());
        editJson(m.resolve("config.json"), c -> c.put("vocab_size", 300));
        assertContains(refusal(m, "F32"), "more than the model's vocab_size 300");

        m = model("window", TinyModelWriter.Variant.qwen2());
        editJson(m.resolve("config.json"), c -> c.put("use_sliding_window", true));
        assertContains(refusal(m, "F32"), "use_sliding_window is not supported for qwen2");
        // Qwen2's biases in F16 weights cannot meet BF16 activations in Jlama
        assertContains(refusal(model("qwen-f16", TinyModelWriter.Variant.qwen2()), "BF16"),
                "working dtype BF16 with F16 weights is not supported for qwen2");
    }

    @Test
    void aMistralSlidingWindowBoundsTheContext() throws Exception {
        Path m = model("mistral-window", TinyModelWriter.Variant.mistral());
        editJson(m.resolve("config.json"), c -> c.put("sliding_window", 256));
        try (JlamaModel x = JlamaModel.load(m, "F32")) {
            assertEquals(256, x.contextLength(), "Jlama attends to the whole context: no longer than the window");
        }
    }

    @Test
    void unsupportedWeights() throws Exception {
        Path m = model("i32", TinyModelWriter.Variant.defaults());
        Path st = m.resolve("model.safetensors");
        byte[] b = Files.readAllBytes(st);
        String s = new String(b, StandardCharsets.ISO_8859_1).replaceFirst("\"dtype\":\"F32\"", "\"dtype\":\"I32\"");
        Files.write(st, s.getBytes(StandardCharsets.ISO_8859_1));
        assertContains(refusal(m, "F32"), "weights dtype I32 (tensor model.embed_tokens.weight in model.safetensors) "
                + "is not supported (supported: BF16, F16, F32)");

        m = model("mixed", new TinyModelWriter.Variant(TinyModelWriter.Arch.LLAMA, "BF16", 1, false,
                TinyModelWriter.TokenizerKind.CHAR));
        st = m.resolve("model.safetensors");
        s = new String(Files.readAllBytes(st), StandardCharsets.ISO_8859_1)
                .replaceFirst("\"dtype\":\"BF16\"", "\"dtype\":\"F16\" ");
        Files.write(st, s.getBytes(StandardCharsets.ISO_8859_1));
        assertContains(refusal(m, "F32"), "weights that mix F16 and BF16 tensors are not supported");

        m = model("shards", TinyModelWriter.Variant.mistral());
        Files.delete(m.resolve("model-00002-of-00003.safetensors"));
        assertContains(refusal(m, "F32"), "the shard model-00002-of-00003.safetensors named by "
                + "model.safetensors.index.json is missing");

        m = model("pickle", TinyModelWriter.Variant.defaults());
        Files.move(m.resolve("model.safetensors"), m.resolve("pytorch_model.bin"));
        assertContains(refusal(m, "F32"), "PyTorch pickle weights such as pytorch_model.bin are not supported");
    }

    @Test
    @SuppressWarnings("unchecked")
    void unsupportedTokenizerFeatures() throws Exception {
        Map<String, Consumer<Map<String, Object>>> edits = Map.of(
                "tokenizer model type 'Unigram' is not supported (supported: BPE)",
                t -> ((Map<String, Object>) t.get("model")).put("type", "Unigram"),
                "tokenizer normalizer 'Lowercase' is not supported",
                t -> t.put("normalizer", Map.of("type", "Lowercase")),
                "tokenizer pre-tokenizer 'Whitespace' is not supported",
                t -> t.put("pre_tokenizer", Map.of("type", "Whitespace")),
                "pre-tokenizer Split behaviour 'Removed' is not supported",
                t -> t.put("pre_tokenizer", Map.of("type", "Split", "pattern", Map.of("Regex", "\\s+"),
                        "behavior", "Removed", "invert", false)),
                "BPE continuing_subword_prefix '##' is not supported",
                t -> ((Map<String, Object>) t.get("model")).put("continuing_subword_prefix", "##"));
        int i = 0;
        for (Map.Entry<String, Consumer<Map<String, Object>>> e : edits.entrySet()) {
            Path m = model("tok" + i++, TinyModelWriter.Variant.llama2());
            editJson(m.resolve("tokenizer.json"), e.getValue());
            assertContains(refusal(m, "F32"), e.getKey());
        }
        Path m = model("spm-only", TinyModelWriter.Variant.llama2());
        Files.move(m.resolve("tokenizer.json"), m.resolve("tokenizer.model"));
        assertContains(refusal(m, "F32"), "no tokenizer.json (a SentencePiece tokenizer.model alone is not supported");
    }
}
