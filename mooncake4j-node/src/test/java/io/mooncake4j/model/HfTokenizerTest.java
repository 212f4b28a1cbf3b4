package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@link HfTokenizer} on the tokenizers {@code make-model} writes: merge order, bytes, added tokens, BOS. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HfTokenizerTest {

    @TempDir
    Path dir;

    private Path write(String name, TinyModelWriter.TokenizerKind kind) throws Exception {
        Path d = dir.resolve(name);
        Files.createDirectories(d);
        TinyTokenizers.Files f = TinyTokenizers.of(kind);
        Files.writeString(d.resolve("tokenizer.json"), f.tokenizer());
        Files.writeString(d.resolve("tokenizer_config.json"), f.tokenizerConfig());
        return d;
    }

    @SuppressWarnings("unchecked")
    private static int id(Path d, String token) throws Exception {
        Map<String, Object> t = Json.parseObject(Files.readString(d.resolve("tokenizer.json")));
        Object v = ((Map<String, Object>) ((Map<String, Object>) t.get("model")).get("vocab")).get(token);
        if (v == null) {
            for (Object a : (List<Object>) t.get("added_tokens")) {
                if (token.equals(((Map<String, Object>) a).get("content"))) {
                    v = ((Map<String, Object>) a).get("id");
                }
            }
        }
        return ((Number) v).intValue();
    }

    @Test
    void byteLevelMergesLowestRankFirstWithinRegexPieces() throws Exception {
        Path d = write("llama3", TinyModelWriter.TokenizerKind.LLAMA3);
        HfTokenizer t = HfTokenizer.load(d);
        assertEquals("byte-level BPE", t.kind());
        int bos = id(d, "<|begin_of_text|>");
        assertEquals(bos, t.bosToken());
        // "then": t h (rank 0) before h e (rank 1), then e n; " cat": a t (rank 7) before Ġ c
        assertArrayEquals(new int[] {bos, id(d, "th"), id(d, "en"), id(d, "\u0120c"), id(d, "at")},
                t.encode("then cat"));
        // a newline is byte 0x0A (Ċ), a multi-byte character its UTF-8 bytes
        int[] ids = t.encode("\u00e9\n");
        assertArrayEquals(new int[] {bos, id(d, "\u00c3"), id(d, "\u00a9"), id(d, "\u010a")}, ids);
        assertEquals("\u00e9\n", t.decode(ids, ids.length));
        assertEquals("\ufffd", t.decode(ids, 2), "an incomplete character decodes to U+FFFD");
    }

    @Test
    void addedTokensSplitTheTextAndSpecialOnesAreNotDecoded() throws Exception {
        Path d = write("qwen2", TinyModelWriter.TokenizerKind.QWEN2);
        HfTokenizer t = HfTokenizer.load(d);
        assertNull(t.bosToken(), "Qwen2 adds no BOS");
        int[] ids = t.encode("<|im_start|>user\nhi<|im_end|>\n");
        assertEquals(id(d, "<|im_start|>"), ids[0]);
        int imEnd = id(d, "<|im_end|>");
        assertTrue(Arrays.stream(ids).anyMatch(x -> x == imEnd));
        assertEquals("user\nhi\n", t.decode(ids, ids.length));
        // digits one by one (Qwen2's regex), a piece never spans a digit and a letter
        int[] digits = t.encode("a123");
        assertEquals(4, digits.length);
    }

    @Test
    void sentencePieceMetaspacePreTokenizerEqualsPrependReplaceNormalizer() throws Exception {
        Path d = write("spm", TinyModelWriter.TokenizerKind.SENTENCEPIECE);
        HfTokenizer normalizer = HfTokenizer.load(d);
        assertEquals("SentencePiece-style BPE with byte fallback", normalizer.kind());
        Path m = write("metaspace", TinyModelWriter.TokenizerKind.SENTENCEPIECE);
        Map<String, Object> tok = Json.parseObject(Files.readString(m.resolve("tokenizer.json")));
        tok.put("normalizer", null);
        tok.put("pre_tokenizer", Map.of("type", "Metaspace", "replacement", "\u2581", "prepend_scheme", "first",
                "split", false));
        Files.writeString(m.resolve("tokenizer.json"), Json.write(tok));
        HfTokenizer metaspace = HfTokenizer.load(m);
        String text = "the rain in spain is caf\u00e9 \u2014 ok";
        assertArrayEquals(normalizer.encode(text), metaspace.encode(text));
        int[] ids = metaspace.encode(text);
        assertEquals(1, ids[0]);
        assertEquals(" " + text, metaspace.decode(ids, ids.length));
    }

    @Test
    void aLongSentencePiecePromptEncodesInOnePass() throws Exception {
        HfTokenizer t = HfTokenizer.load(write("long", TinyModelWriter.TokenizerKind.SENTENCEPIECE));
        String text = "the quick brown fox jumps over the lazy dog and then it rests. ".repeat(400);
        int[] ids = t.encode(text);
        assertTrue(ids.length < text.length() && ids.length > text.length() / 4, "tokens: " + ids.length);
        assertEquals(" " + text, t.decode(ids, ids.length));
    }

    @Test
    void theCharacterTokenizerRoundTrips() throws Exception {
        HfTokenizer t = HfTokenizer.load(write("char", TinyModelWriter.TokenizerKind.CHAR));
        assertEquals("BPE", t.kind());
        int[] ids = t.encode("the cat sat on the mat\n");
        assertEquals(TinyModelWriter.BOS, ids[0]);
        assertEquals("the cat sat on the mat\n", t.decode(ids, ids.length));
        // no byte fallback: a character outside the vocabulary is <unk>
        assertEquals(TinyModelWriter.UNK, t.encode("\u00e9")[1]);
    }
}
