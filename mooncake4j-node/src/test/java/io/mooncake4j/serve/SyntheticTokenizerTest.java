package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SyntheticTokenizerTest {

    @Test
    void encodesUtf8BytesAndDecodesEveryIdToADistinctWord() {
        assertArrayEquals(new int[] {'h', 'i', 0xC3, 0xA9}, SyntheticTokenizer.encode("hi\u00e9"));
        assertEquals(" bababa", SyntheticTokenizer.decode(0));
        assertEquals(" lozozo", SyntheticTokenizer.decode(SyntheticTokenizer.VOCAB_SIZE - 1), "digits 31, 63, 63");
        Set<String> words = new HashSet<>();
        for (int t = 0; t < SyntheticTokenizer.VOCAB_SIZE; t += 7) {
            String w = SyntheticTokenizer.decode(t);
            assertTrue(w.matches(" [a-z]{6}"), w);
            words.add(w);
        }
        assertEquals((SyntheticTokenizer.VOCAB_SIZE + 6) / 7, words.size(), "no two ids share a word");
        assertEquals(" bababa bababe", SyntheticTokenizer.decode(new int[] {0, 1}));
        assertThrows(IllegalArgumentException.class, () -> SyntheticTokenizer.decode(SyntheticTokenizer.VOCAB_SIZE));
    }

    @Test
    void rendersChatMessagesWithTheDocumentedTemplate() {
        assertEquals("<|system|>\nbe brief\n<|user|>\nhello world\n<|assistant|>\n", SyntheticTokenizer.renderChat(List.of(
                Map.of("role", "system", "content", "be brief"),
                Map.of("role", "user", "content", List.of(Map.of("type", "text", "text", "hello "),
                        Map.of("type", "image_url", "image_url", "x"), Map.of("type", "text", "text", "world"))))));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> SyntheticTokenizer.renderChat(List.of(
                Map.of("role", "user", "content", 5)))).getMessage().contains("messages[0].content"));
    }
}
