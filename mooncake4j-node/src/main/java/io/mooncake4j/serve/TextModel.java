package io.mooncake4j.serve;

import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.JlamaStepModel;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * How a node turns request text into tokens and tokens back into text: the synthetic tokenizer of a
 * preset model ({@link #SYNTHETIC}), or a real model's tokenizer and chat template ({@link #of}).
 *
 * <p>Thread-safe: called from the HTTP threads and (stop checks) the engine's step loop.
 */
interface TextModel {

    /** Token ids a prompt given as ids may use: {@code [0, vocabSize)}. */
    int vocabSize();

    /** The prompt's tokens. */
    int[] encode(String text);

    /**
     * The tokens of chat messages rendered through the chat template, with the generation prompt.
     *
     * @throws IllegalArgumentException naming the message and field at fault
     */
    int[] encodeChat(List<?> messages);

    /** The text of the first {@code count} generated tokens. */
    String decode(int[] tokens, int count);

    /** Whether generation ends at this token (end of sequence). */
    boolean isEos(int token);

    /** Whether it is a real model: sampling settings, stop strings and end-of-sequence tokens apply. */
    boolean real();

    /**
     * How the engine's request {@code engineRequestId} samples (before it is submitted).
     *
     * @param temperature null or 0 for greedy
     * @param seed        null for a seed of the request's own (then the answer is not reproducible)
     */
    void sampling(String engineRequestId, Double temperature, Long seed);

    /** The synthetic model's: bytes in, words out (see {@link SyntheticTokenizer}). */
    TextModel SYNTHETIC = new TextModel() {
        @Override
        public int vocabSize() {
            return SyntheticTokenizer.VOCAB_SIZE;
        }

        @Override
        public int[] encode(String text) {
            return SyntheticTokenizer.encode(text);
        }

        @Override
        public int[] encodeChat(List<?> messages) {
            return SyntheticTokenizer.encode(SyntheticTokenizer.renderChat(messages));
        }

        @Override
        public String decode(int[] tokens, int count) {
            return SyntheticTokenizer.decode(Arrays.copyOf(tokens, count));
        }

        @Override
        public boolean isEos(int token) {
            return false;
        }

        @Override
        public boolean real() {
            return false;
        }

        @Override
        public void sampling(String engineRequestId, Double temperature, Long seed) {
            // the synthetic model's tokens are a function of the prompt and its KV
        }
    };

    /** A Jlama model's tokenizer and chat template; sampling settings go to {@code steps}. */
    static TextModel of(JlamaModel model, JlamaStepModel steps) {
        return new TextModel() {
            @Override
            public int vocabSize() {
                return model.vocabularySize();
            }

            @Override
            public int[] encode(String text) {
                return model.encode(text);
            }

            @Override
            public int[] encodeChat(List<?> messages) {
                List<String[]> msgs = new ArrayList<>();
                for (int i = 0; i < messages.size(); i++) {
                    if (!(messages.get(i) instanceof Map<?, ?> m)) {
                        throw new IllegalArgumentException("messages[" + i + "] must be an object");
                    }
                    if (!(m.get("role") instanceof String role) || !List.of("system", "user", "assistant").contains(role)) {
                        throw new IllegalArgumentException("messages[" + i + "].role must be system, user or assistant");
                    }
                    msgs.add(new String[] {role, content(i, m.get("content"))});
                }
                String prompt = model.applyChatTemplate(msgs).orElseThrow(() -> new IllegalArgumentException(
                        "the model has no chat template (tokenizer_config.json chat_template); use /v1/completions"));
                return model.encode(prompt);
            }

            private String content(int i, Object content) {
                return switch (content) {
                    case null -> "";
                    case String s -> s;
                    case List<?> parts -> {
                        StringBuilder sb = new StringBuilder();
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
                        yield sb.toString();
                    }
                    default -> throw new IllegalArgumentException("messages[" + i
                            + "].content must be a string or a list of content parts");
                };
            }

            @Override
            public String decode(int[] tokens, int count) {
                return model.decode(tokens, count);
            }

            @Override
            public boolean isEos(int token) {
                return model.eosTokens().contains(token);
            }

            @Override
            public boolean real() {
                return true;
            }

            @Override
            public void sampling(String engineRequestId, Double temperature, Long seed) {
                if (temperature != null && temperature > 0) {
                    long s = seed != null ? seed : java.util.concurrent.ThreadLocalRandom.current().nextLong();
                    steps.sampling(engineRequestId, new JlamaStepModel.Sampling(temperature.floatValue(), s));
                }
            }
        };
    }
}
