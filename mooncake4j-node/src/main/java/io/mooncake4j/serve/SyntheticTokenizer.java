package io.mooncake4j.serve;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * The serving node's synthetic tokenizer and chat template: deterministic, no vocabulary file.
 *
 * <ul>
 *   <li><b>Encoding</b> a text prompt: its UTF-8 bytes, one token per byte (ids 0..255).</li>
 *   <li>A prompt given as token ids is taken as is; ids must be in {@code 0..}{@value #VOCAB_SIZE}{@code -1}.</li>
 *   <li><b>Decoding</b> a generated token id {@code t} (the synthetic model samples ids in
 *       {@code 0..2^17-1}): a space followed by a three-syllable word, the syllables being the
 *       base-64 digits of {@code t} (most significant first), each a consonant of
 *       {@code "bdfghjklmnprstvz"} and a vowel of {@code "aeio"}: id 0 is {@code " bababa"}.</li>
 *   <li><b>Chat template</b>: each message as {@code "<|role|>\n" + content + "\n"}, then
 *       {@code "<|assistant|>\n"}; a content given as a list of parts contributes the
 *       {@code text} of its {@code "type":"text"} parts, concatenated.</li>
 * </ul>
 *
 * <p>Stateless and thread-safe.
 */
public final class SyntheticTokenizer {

    /** Token ids a prompt may use, and the range the synthetic model samples from. */
    public static final int VOCAB_SIZE = 1 << 17;

    private static final String CONSONANTS = "bdfghjklmnprstvz";
    private static final String VOWELS = "aeio";

    private SyntheticTokenizer() {}

    /** The tokens of a text prompt: its UTF-8 bytes. */
    public static int[] encode(String text) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        int[] out = new int[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = b[i] & 0xFF;
        }
        return out;
    }

    /** The text of one generated token. */
    public static String decode(int token) {
        if (token < 0 || token >= VOCAB_SIZE) {
            throw new IllegalArgumentException("token id out of range: " + token);
        }
        StringBuilder sb = new StringBuilder(7).append(' ');
        for (int shift = 12; shift >= 0; shift -= 6) {
            int digit = (token >>> shift) & 63;
            sb.append(CONSONANTS.charAt(digit >>> 2)).append(VOWELS.charAt(digit & 3));
        }
        return sb.toString();
    }

    /** The text of generated tokens. */
    public static String decode(int[] tokens) {
        StringBuilder sb = new StringBuilder(tokens.length * 7);
        for (int t : tokens) {
            sb.append(decode(t));
        }
        return sb.toString();
    }

    /**
     * Renders chat messages with the template above.
     *
     * @param messages each with a {@code role} and a {@code content} (a string or a list of parts)
     * @throws IllegalArgumentException naming the message and field at fault
     */
    public static String renderChat(List<?> messages) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < messages.size(); i++) {
            if (!(messages.get(i) instanceof Map<?, ?> m)) {
                throw new IllegalArgumentException("messages[" + i + "] must be an object");
            }
            if (!(m.get("role") instanceof String role) || role.isEmpty()) {
                throw new IllegalArgumentException("messages[" + i + "].role must be a non-empty string");
            }
            Object content = m.get("content");
            sb.append("<|").append(role).append("|>\n");
            switch (content) {
                case null -> { }
                case String s -> sb.append(s);
                case List<?> parts -> {
                    for (int k = 0; k < parts.size(); k++) {
                        if (!(parts.get(k) instanceof Map<?, ?> part)) {
                            throw new IllegalArgumentException("messages[" + i + "].content[" + k
                                    + "] must be an object");
                        }
                        if ("text".equals(part.get("type"))) {
                            if (!(part.get("text") instanceof String t)) {
                                throw new IllegalArgumentException("messages[" + i + "].content[" + k
                                        + "].text must be a string");
                            }
                            sb.append(t);
                        }
                    }
                }
                default -> throw new IllegalArgumentException("messages[" + i
                        + "].content must be a string or a list of content parts");
            }
            sb.append('\n');
        }
        return sb.append("<|assistant|>\n").toString();
    }
}
