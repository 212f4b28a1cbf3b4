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

    /**
     * The ids Hugging Face's own tokenizers library gives for the tokenizers {@code make-model} writes
     * (golden file: {@code tokenizers} 0.23.2 from PyPI, {@code encode(text, add_special_tokens=False)}), for text
     * with repeated spaces, tabs, newlines, contractions, digits, non-ASCII characters and added tokens.
     */
    @Test
    @SuppressWarnings("unchecked")
    void theIdsEqualHuggingFaceTokenizers() throws Exception {
        Map<String, Object> golden;
        try (var in = HfTokenizerTest.class.getResourceAsStream("hf-tokenizers-golden.json")) {
            golden = Json.parseObject(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
        }
        List<Object> texts = (List<Object>) golden.get("texts");
        Map<String, Object> ids = (Map<String, Object>) golden.get("ids");
        Map<String, TinyModelWriter.TokenizerKind> kinds = Map.of("llama3", TinyModelWriter.TokenizerKind.LLAMA3,
                "qwen2", TinyModelWriter.TokenizerKind.QWEN2, "mistral", TinyModelWriter.TokenizerKind.SENTENCEPIECE,
                "llama2", TinyModelWriter.TokenizerKind.SENTENCEPIECE, "tiny", TinyModelWriter.TokenizerKind.CHAR);
        Map<String, Path> dirs = new java.util.HashMap<>();
        for (Map.Entry<String, TinyModelWriter.TokenizerKind> k : kinds.entrySet()) {
            dirs.put(k.getKey(), write("golden-" + k.getKey(), k.getValue()));
        }
        dirs.put("metaspace", metaspace(write("golden-metaspace", TinyModelWriter.TokenizerKind.SENTENCEPIECE)));
        int compared = 0;
        for (Map.Entry<String, Path> k : dirs.entrySet()) {
            HfTokenizer t = HfTokenizer.load(k.getValue());
            List<Object> want = (List<Object>) ids.get(k.getKey());
            for (int i = 0; i < texts.size(); i++) {
                int[] got = t.encode((String) texts.get(i));
                int[] w = ((List<Object>) want.get(i)).stream().mapToInt(x -> ((Number) x).intValue()).toArray();
                // HF's ids are without the BOS our encode adds (unless the text itself starts with it)
                int skip = t.bosToken() != null && got[0] == t.bosToken() && (w.length == 0 || w[0] != t.bosToken())
                        ? 1 : 0;
                assertArrayEquals(w, Arrays.copyOfRange(got, skip, got.length),
                        k.getKey() + ": \"" + texts.get(i) + "\"");
                compared++;
            }
        }
        assertEquals(6 * texts.size(), compared);
    }

    /** The SentencePiece tokenizer in Mistral v0.3's form: a Metaspace pre-tokenizer (prepend first), no normalizer. */
    private static Path metaspace(Path d) throws Exception {
        Map<String, Object> tok = Json.parseObject(Files.readString(d.resolve("tokenizer.json")));
        tok.put("normalizer", null);
        tok.put("pre_tokenizer", Map.of("type", "Metaspace", "replacement", "\u2581", "prepend_scheme", "first",
                "split", false));
        Files.writeString(d.resolve("tokenizer.json"), Json.write(tok));
        return d;
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
        assertEquals("", t.decode(ids, 2), "a character the tokens only begin waits for the next token");
        assertEquals("\ufffda", t.decode(new int[] {id(d, "\u00c3"), id(d, "a")}, 2), "a broken one is U+FFFD");

        // Llama 3.1's form: the TemplateProcessing inside a Sequence post-processor
        Map<String, Object> tok = Json.parseObject(Files.readString(d.resolve("tokenizer.json")));
        tok.put("post_processor", Map.of("type", "Sequence", "processors", List.of(
                Map.of("type", "ByteLevel", "add_prefix_space", true, "trim_offsets", false, "use_regex", true),
                tok.get("post_processor"))));
        Files.writeString(d.resolve("tokenizer.json"), Json.write(tok));
        assertEquals(bos, HfTokenizer.load(d).bosToken());
    }

    /** The text of a prefix of the tokens is a prefix of the text of all of them (what a stream relies on). */
    @Test
    void decodingIsPrefixStableAcrossCharactersThatSpanTokens() throws Exception {
        Path d = write("stable", TinyModelWriter.TokenizerKind.LLAMA3);
        HfTokenizer t = HfTokenizer.load(d);
        int[] text = t.encode("caf\u00e9 \u20ac 10 \ud83d\ude00 \u4e2d\u6587");
        java.util.SplittableRandom r = new java.util.SplittableRandom(3);
        for (int round = 0; round < 200; round++) {
            int[] ids = new int[24];
            for (int i = 0; i < ids.length; i++) {
                // mostly the pieces of real text, sometimes any byte
                ids[i] = r.nextInt(4) == 0 ? r.nextInt(256) : text[1 + r.nextInt(text.length - 1)];
            }
            String all = t.decode(ids, ids.length);
            for (int k = 0; k <= ids.length; k++) {
                String part = t.decode(ids, k);
                assertTrue(all.startsWith(part), "round " + round + ", " + k + " tokens: \"" + part + "\" is not a prefix"
                        + " of \"" + all + "\"");
            }
        }
        // and a complete text decodes whole
        assertEquals("caf\u00e9 \u20ac 10 \ud83d\ude00 \u4e2d\u6587", t.decode(text, text.length));
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
        HfTokenizer metaspace = HfTokenizer.load(metaspace(write("metaspace", TinyModelWriter.TokenizerKind.SENTENCEPIECE)));
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
