package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The tiny checkpoint: deterministic, loadable by Jlama, with a working tokenizer and chat template; bad directories refused clearly. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TinyModelWriterTest {

    @TempDir
    Path dir;

    @Test
    void sameSeedSameBytesOtherSeedOtherWeights() throws Exception {
        TinyModelWriter.write(dir.resolve("a"), TinyModelWriter.Shape.tiny());
        TinyModelWriter.write(dir.resolve("b"), TinyModelWriter.Shape.tiny());
        TinyModelWriter.write(dir.resolve("c"), TinyModelWriter.Shape.tiny().withSeed(26));
        for (String f : List.of("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors")) {
            assertArrayEquals(Files.readAllBytes(dir.resolve("a").resolve(f)), Files.readAllBytes(dir.resolve("b").resolve(f)), f);
        }
        assertFalse(java.util.Arrays.equals(Files.readAllBytes(dir.resolve("a/model.safetensors")),
                Files.readAllBytes(dir.resolve("c/model.safetensors"))));
        // every form a download comes in, file for file
        for (TinyModelWriter.Variant v : List.of(TinyModelWriter.Variant.llama3(), TinyModelWriter.Variant.qwen2(),
                TinyModelWriter.Variant.mistral(), TinyModelWriter.Variant.llama2())) {
            List<Path> first = TinyModelWriter.write(dir.resolve("x-" + v.arch() + v.dtype()), TinyModelWriter.Shape.tiny(), v);
            List<Path> again = TinyModelWriter.write(dir.resolve("y-" + v.arch() + v.dtype()), TinyModelWriter.Shape.tiny(), v);
            assertEquals(first.size(), again.size());
            for (int i = 0; i < first.size(); i++) {
                assertEquals(first.get(i).getFileName(), again.get(i).getFileName());
                assertArrayEquals(Files.readAllBytes(first.get(i)), Files.readAllBytes(again.get(i)), first.get(i).toString());
            }
        }
    }

    @Test
    void jlamaLoadsItInBothDtypes() {
        TinyModelWriter.write(dir.resolve("m"), TinyModelWriter.Shape.tiny());
        for (String dtype : List.of("F32", "BF16")) {
            try (JlamaModel m = JlamaModel.load(dir.resolve("m"), dtype)) {
                assertEquals(2, m.numLayers());
                assertEquals(2, m.numKvHeads());
                assertEquals(32, m.headSize());
                assertEquals(dtype.equals("F32") ? 4 : 2, m.dtypeBytes());
                assertEquals(16L * 2 * 32 * m.dtypeBytes() * 2, m.kvShape(16).pageBytes(1));
                assertEquals(TinyModelWriter.vocabulary().size(), m.vocabularySize());
                int[] ids = m.encode("the cat sat on the mat");
                assertEquals(TinyModelWriter.BOS, ids[0]);
                assertTrue(ids.length < 1 + "the cat sat on the mat".length(), "bigram merges apply: " + ids.length);
                int[] text = java.util.Arrays.copyOfRange(ids, 1, ids.length);
                assertEquals("the cat sat on the mat", m.decode(text, text.length));
                String chat = m.applyChatTemplate(List.<String[]>of(new String[] {"user", "hi"})).orElseThrow();
                assertEquals("<|user|>\nhi\n<|assistant|>\n", chat);
            }
        }
    }

    @Test
    void badDirectoriesGetClearErrors() throws Exception {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> JlamaModel.load(dir.resolve("nope"), "F32"));
        assertTrue(e.getMessage().contains("does not exist"), e.getMessage());

        TinyModelWriter.write(dir.resolve("m"), TinyModelWriter.Shape.tiny());
        Files.delete(dir.resolve("m/model.safetensors"));
        e = assertThrows(IllegalArgumentException.class, () -> JlamaModel.load(dir.resolve("m"), "F32"));
        assertTrue(e.getMessage().contains("incomplete: no model.safetensors"), e.getMessage());

        TinyModelWriter.write(dir.resolve("g"), TinyModelWriter.Shape.tiny());
        Path cfg = dir.resolve("g/config.json");
        Files.writeString(cfg, Files.readString(cfg).replace("\"llama\"", "\"gpt2\""));
        e = assertThrows(IllegalArgumentException.class, () -> JlamaModel.load(dir.resolve("g"), "F32"));
        assertTrue(e.getMessage().contains("architecture 'gpt2' is not supported"), e.getMessage());

        e = assertThrows(IllegalArgumentException.class, () -> JlamaModel.load(dir.resolve("m"), "F16"));
        assertTrue(e.getMessage().contains("F32 or BF16"), e.getMessage());
    }

    @Test
    void makeModelFlagsPickEachPart() throws Exception {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        java.io.PrintStream o = new java.io.PrintStream(out, true, java.nio.charset.StandardCharsets.UTF_8);
        java.io.PrintStream e = new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8);
        Path m = dir.resolve("flags");
        assertEquals(0, io.mooncake4j.cli.Main.run(new String[] {"make-model", "--tiny", m.toString(), "--like", "llama2",
                "--arch", "mistral", "--dtype", "bf16", "--shards", "2", "--tied", "--tokenizer", "llama3"}, o, e),
                err.toString(java.nio.charset.StandardCharsets.UTF_8));
        var config = io.mooncake4j.internal.json.Json.parseObject(Files.readString(m.resolve("config.json")));
        assertEquals("mistral", config.get("model_type"));
        assertEquals(true, config.get("tie_word_embeddings"));
        assertEquals("bfloat16", config.get("torch_dtype"));
        assertTrue(Files.isRegularFile(m.resolve("model.safetensors.index.json")));
        assertTrue(Files.isRegularFile(m.resolve("model-00002-of-00002.safetensors")));
        assertTrue(Files.readString(m.resolve("tokenizer.json")).contains("<|begin_of_text|>"));
        try (JlamaModel loaded = JlamaModel.load(m, "F32")) {
            assertEquals("byte-level BPE", loaded.tokenizerKind());
        }

        err.reset();
        assertEquals(2, io.mooncake4j.cli.Main.run(new String[] {"make-model", "--tiny", m.toString(), "--like",
                "gemma"}, o, e));
        assertTrue(err.toString(java.nio.charset.StandardCharsets.UTF_8).contains(
                "--like must be llama3, qwen2, mistral or llama2, got gemma"), err.toString());
        err.reset();
        assertEquals(2, io.mooncake4j.cli.Main.run(new String[] {"make-model", "--tiny", m.toString(), "--dtype",
                "I8"}, o, e));
        assertTrue(err.toString(java.nio.charset.StandardCharsets.UTF_8).contains(
                "the weights' dtype must be F32, F16 or BF16, got I8"), err.toString());
    }
}
