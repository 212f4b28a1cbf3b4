package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.sim.SimProxy;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Each form a downloaded checkpoint comes in, as {@code make-model} writes it: the files are what Hugging
 * Face ships (dtype, shards and index, tied embeddings, Qwen2 biases, the tokenizer's kind), Jlama loads
 * it, the tokenizer round-trips text (non-ASCII included) with the family's BOS convention, the chat
 * template renders, and a P/D pair decodes the same tokens as one node (the machinery of
 * {@link JlamaDisaggTest}).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CheckpointVariantsTest {

    private static final String TEXT = "the cat sat on the mat. Caf\u00e9 \u00fcber 42 \u2014 ok?\nnext line";

    @TempDir
    static Path dir;

    static Stream<Arguments> variants() {
        return Stream.of(
                Arguments.of("llama3-bf16-sharded-tied", TinyModelWriter.Variant.llama3()),
                Arguments.of("qwen2-f16-sharded-tied", TinyModelWriter.Variant.qwen2()),
                Arguments.of("mistral-bf16-sharded", TinyModelWriter.Variant.mistral()),
                Arguments.of("llama2-f16", TinyModelWriter.Variant.llama2()));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void theFilesAreWhatADownloadHolds(String name, TinyModelWriter.Variant v) throws Exception {
        Path m = dir.resolve("files-" + name);
        TinyModelWriter.write(m, TinyModelWriter.Shape.tiny(), v);
        Map<String, Object> config = Json.parseObject(Files.readString(m.resolve("config.json")));
        assertEquals(v.arch().modelType, config.get("model_type"));
        assertEquals(v.tied(), config.get("tie_word_embeddings"));
        Set<String> tensors = new HashSet<>();
        Set<String> dtypes = new HashSet<>();
        if (v.shards() > 1) {
            assertFalse(Files.exists(m.resolve("model.safetensors")));
            @SuppressWarnings("unchecked")
            Map<String, Object> weightMap = (Map<String, Object>) Json.parseObject(
                    Files.readString(m.resolve("model.safetensors.index.json"))).get("weight_map");
            assertEquals(v.shards(), new HashSet<>(weightMap.values()).size(), weightMap.toString());
            for (Object f : new HashSet<>(weightMap.values())) {
                Map<String, Object> h = header(m.resolve((String) f));
                for (String t : h.keySet()) {
                    if (!t.equals("__metadata__")) {
                        assertEquals(f, weightMap.get(t), "the index names the file that holds " + t);
                        tensors.add(t);
                        dtypes.add(dtypeOf(h, t));
                    }
                }
            }
            assertEquals(weightMap.keySet(), tensors);
        } else {
            Map<String, Object> h = header(m.resolve("model.safetensors"));
            h.keySet().stream().filter(t -> !t.equals("__metadata__")).forEach(t -> {
                tensors.add(t);
                dtypes.add(dtypeOf(h, t));
            });
        }
        assertEquals(Set.of(v.dtype()), dtypes);
        assertEquals(!v.tied(), tensors.contains("lm_head.weight"));
        assertEquals(v.arch() == TinyModelWriter.Arch.QWEN2, tensors.contains("model.layers.1.self_attn.k_proj.bias"));
    }

    @SuppressWarnings("unchecked")
    private static String dtypeOf(Map<String, Object> header, String tensor) {
        return (String) ((Map<String, Object>) header.get(tensor)).get("dtype");
    }

    private static Map<String, Object> header(Path f) throws Exception {
        try (InputStream in = Files.newInputStream(f)) {
            long n = ByteBuffer.wrap(in.readNBytes(8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
            return Json.parseObject(new String(in.readNBytes((int) n), StandardCharsets.UTF_8));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void loadsTokenizesAndPdEqualsOneNode(String name, TinyModelWriter.Variant v) throws Exception {
        Path m = dir.resolve(name);
        TinyModelWriter.write(m, TinyModelWriter.Shape.tiny(), v);
        try (JlamaModel model = JlamaModel.load(m, "F32")) {
            assertTrue(model.kvLayout().startsWith(v.arch().modelType + "/L2/H4/KV2/D32/F32/"), model.kvLayout());
            Map<String, Object> config = Json.parseObject(Files.readString(m.resolve("config.json")));
            int bos = ((Number) config.get("bos_token_id")).intValue();
            // the end-of-sequence ids of config.json and of generation_config.json (where the download has one)
            Object eos = config.get("eos_token_id");
            for (Object id : eos instanceof List<?> l ? l : List.of(eos)) {
                assertTrue(model.eosTokens().contains(((Number) id).intValue()), model.eosTokens().toString());
            }
            Path gen = m.resolve("generation_config.json");
            if (v.tokenizer() == TinyModelWriter.TokenizerKind.QWEN2) {
                Object genEos = Json.parseObject(Files.readString(gen)).get("eos_token_id");
                for (Object id : (List<?>) genEos) {
                    assertTrue(model.eosTokens().contains(((Number) id).intValue()), "generation_config.json's "
                            + genEos + " in " + model.eosTokens());
                }
                assertEquals(2, model.eosTokens().size(), model.eosTokens().toString());
            }

            int[] ids = model.encode(TEXT);
            boolean sentencePiece = v.tokenizer() == TinyModelWriter.TokenizerKind.SENTENCEPIECE;
            if (v.tokenizer() == TinyModelWriter.TokenizerKind.QWEN2) {
                assertNotEquals(bos, ids[0], "Qwen2 adds no beginning-of-sequence token");
                assertEquals(TEXT, model.decode(ids, ids.length));
            } else {
                assertEquals(bos, ids[0], "Llama and Mistral begin with BOS");
                assertEquals(1, java.util.Arrays.stream(ids).filter(t -> t == bos).count());
                // SentencePiece marks the start of the text as a space; the answer's text keeps it
                assertEquals(sentencePiece ? " " + TEXT : TEXT, model.decode(ids, ids.length), "BOS is not text");
            }
            assertTrue(ids.length < TEXT.length(), "merges apply: " + ids.length + " tokens for " + TEXT.length()
                    + " characters");
            if (sentencePiece) {
                int[] e = model.encode("\u00e9");
                // <unk> <s> </s>, then <0x00>..<0xFF> from id 3, then ▁ (259)
                assertEquals(List.of(bos, 259, 3 + 0xC3, 3 + 0xA9), java.util.Arrays.stream(e).boxed().toList(),
                        "a character outside the vocabulary falls back to its UTF-8 bytes");
            }

            String chat = model.applyChatTemplate(List.<String[]>of(new String[] {"user", "hello there"}))
                    .orElseThrow();
            assertTrue(chat.contains("hello there"), chat);
            int[] chatIds = model.encode(chat);
            assertTrue(java.util.Arrays.stream(chatIds).filter(t -> t == bos).count() <= 1,
                    "a template that writes BOS does not get a second one: " + chat);

            try (JlamaDisaggTest.Rig rig = new JlamaDisaggTest.Rig(model, model, null)) {
                SplittableRandom r = new SplittableRandom(7);
                int[][] prompts = {ids, random(r, model, 37), random(r, model, 48), random(r, model, 5)};
                int tokens = 0;
                for (int i = 0; i < prompts.length; i++) {
                    int[] want = rig.single(name + "-single-" + i, prompts[i]);
                    SimProxy.Exchange x = rig.disagg(name + "-pd-" + i, prompts[i]);
                    assertTrue(x.prefill().ok() && x.decode().ok(), x.toString());
                    assertEquals(prompts[i].length, x.decode().externalTokens(), "D loads the whole prompt: " + x);
                    assertArrayEquals(want, x.decode().outputTokens(), name + ", request " + i);
                    tokens += want.length;
                }
                assertTrue(tokens > 0);
            }
        }
    }

    private static int[] random(SplittableRandom r, JlamaModel m, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(m.vocabularySize());
        }
        return t;
    }

    @Test
    void theWorkingDTypeBf16RunsBf16Checkpoints() throws Exception {
        TinyModelWriter.Variant qwenBf16 = new TinyModelWriter.Variant(TinyModelWriter.Arch.QWEN2, "BF16", 1, true,
                TinyModelWriter.TokenizerKind.QWEN2);
        for (TinyModelWriter.Variant v : List.of(TinyModelWriter.Variant.llama3(), qwenBf16,
                TinyModelWriter.Variant.llama2())) {
            Path m = dir.resolve("bf16-" + v.arch() + "-" + v.dtype());
            TinyModelWriter.write(m, TinyModelWriter.Shape.tiny(), v);
            try (JlamaModel model = JlamaModel.load(m, "BF16");
                    JlamaDisaggTest.Rig rig = new JlamaDisaggTest.Rig(model, model, null)) {
                int[] prompt = model.encode("the rain in spain stays mainly in the plain");
                int[] want = rig.single("bf16-single-" + v.arch() + v.dtype(), prompt);
                SimProxy.Exchange x = rig.disagg("bf16-pd-" + v.arch() + v.dtype(), prompt);
                assertTrue(x.prefill().ok() && x.decode().ok(), x.toString());
                assertArrayEquals(want, x.decode().outputTokens(), v.toString());
            }
        }
    }
}
