package io.mooncake4j.model;

import io.mooncake4j.internal.json.Json;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@code tokenizer.json} and {@code tokenizer_config.json} of the tiny models, one per
 * {@link TinyModelWriter.TokenizerKind}, in the shapes real checkpoints ship: small vocabularies, but
 * the same normalizers, pre-tokenizers, byte handling, added tokens, BOS conventions and chat
 * templates as Llama 3, Qwen2 and Llama 2 / Mistral.
 */
final class TinyTokenizers {

    /** Bigram merges, most frequent English pairs first (the merge rank is the index). */
    static final String[] BIGRAMS = {
        "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of", "ed",
        "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co",
        "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "li", "ch", "ll", "be", "ma", "si",
        "om", "ur", "ca", "el", "ta", "la", "ns", "di", "fo", "ho", "pe", "ec", "pr", "no", "ct", "us",
        "ac", "ot", "il", "tr", "ly", "nc", "et", "ut", "ss", "so", "rs", "un", "lo", "wa", "ge", "ie",
        "wh", "ee", "wi", "em", "ad", "ol", "rt", "po", "we", "na", "ul", "ni", "ts", "mo", "ow", "pa"};

    /** Llama 3's pre-tokenizer regex. */
    static final String LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?"
            + "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    /** Qwen2's pre-tokenizer regex (digits one by one). */
    static final String QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?"
            + "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

    /**
     * One tokenizer: its files' JSON and the ids the config needs.
     *
     * @param tokenizer       tokenizer.json
     * @param tokenizerConfig tokenizer_config.json
     * @param vocabSize       ids in use (the config's {@code vocab_size})
     * @param bos             {@code bos_token_id}
     * @param eos             {@code eos_token_id}: the ids that end a sequence
     * @param generationEos   {@code generation_config.json}'s {@code eos_token_id}, empty for no such file
     */
    record Files(String tokenizer, String tokenizerConfig, int vocabSize, int bos, List<Integer> eos,
            List<Integer> generationEos) {}

    private TinyTokenizers() {}

    static Files of(TinyModelWriter.TokenizerKind kind) {
        return switch (kind) {
            case CHAR -> chars();
            case LLAMA3 -> byteLevel(false);
            case QWEN2 -> byteLevel(true);
            case SENTENCEPIECE -> sentencePiece();
        };
    }

    /** The vocabulary of the character-level tokenizer, id order: specials, newline, printable ASCII, bigrams. */
    static List<String> charVocabulary() {
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

    private static Files chars() {
        List<String> vocab = charVocabulary();
        List<String> merges = new ArrayList<>();
        for (String m : BIGRAMS) {
            merges.add(m.charAt(0) + " " + m.charAt(1));
        }
        Map<String, Object> model = bpe(vocab, merges, "<unk>", false, false);
        String tok = tokenizer(added(List.of("<unk>", "<s>", "</s>"), 0), null, null, null, model, null);
        String template = "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
                + "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";
        Map<String, Object> cfg = new LinkedHashMap<>();
        cfg.put("add_bos_token", true);
        cfg.put("bos_token", "<s>");
        cfg.put("eos_token", "</s>");
        cfg.put("unk_token", "<unk>");
        cfg.put("legacy", false);
        cfg.put("model_max_length", 512);
        cfg.put("chat_template", template);
        return new Files(tok, Json.write(cfg) + "\n", vocab.size(), 1, List.of(2), List.of());
    }

    /** Llama 3 (Split by regex, ByteLevel; BOS by the post-processor) or Qwen2 (NFC first; no BOS). */
    private static Files byteLevel(boolean qwen) {
        List<String> vocab = new ArrayList<>();
        for (int b = 0; b < 256; b++) {
            vocab.add(Character.toString(HfTokenizer.ByteLevel.ENCODE[b]));
        }
        List<String> merges = new ArrayList<>();
        String space = Character.toString(HfTokenizer.ByteLevel.ENCODE[' ']);
        for (String m : BIGRAMS) {
            merges.add(m.charAt(0) + " " + m.charAt(1));
        }
        for (char c = 'a'; c <= 'z'; c++) {
            merges.add(space + " " + c);
        }
        for (String w : List.of("he", "nd", "in", "or", "of", "on", "ha", "is", "re", "ou")) {
            merges.add(space + w.charAt(0) + " " + w.substring(1));
        }
        merges.addAll(List.of(space + "t he", space + "a nd"));
        for (String m : merges) {
            String merged = m.replace(" ", "");
            if (!vocab.contains(merged)) {
                vocab.add(merged);
            }
        }
        List<String> specials = qwen ? List.of("<|endoftext|>", "<|im_start|>", "<|im_end|>")
                : List.of("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                        "<|eot_id|>");
        int first = vocab.size();
        Map<String, Object> model = bpe(vocab, merges, null, false, !qwen);
        Map<String, Object> split = new LinkedHashMap<>();
        split.put("type", "Split");
        split.put("pattern", Map.of("Regex", qwen ? QWEN2_REGEX : LLAMA3_REGEX));
        split.put("behavior", "Isolated");
        split.put("invert", false);
        Map<String, Object> bl = new LinkedHashMap<>();
        bl.put("type", "ByteLevel");
        bl.put("add_prefix_space", false);
        bl.put("trim_offsets", !qwen);
        bl.put("use_regex", false);
        Map<String, Object> pre = Map.of("type", "Sequence", "pretokenizers", List.of(split, bl));
        Object post;
        if (qwen) {
            post = Map.of("type", "ByteLevel", "add_prefix_space", false, "trim_offsets", false, "use_regex", false);
        } else {
            post = Map.of("type", "TemplateProcessing",
                    "single", List.of(Map.of("SpecialToken", Map.of("id", "<|begin_of_text|>", "type_id", 0)),
                            Map.of("Sequence", Map.of("id", "A", "type_id", 0))),
                    "pair", List.of(), "special_tokens", Map.of());
        }
        Map<String, Object> decoder = Map.of("type", "ByteLevel", "add_prefix_space", true, "trim_offsets", true,
                "use_regex", true);
        String tok = tokenizer(added(specials, first), qwen ? Map.of("type", "NFC") : null, pre, post, model, decoder);
        Map<String, Object> cfg = new LinkedHashMap<>();
        String template;
        if (qwen) {
            template = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
                    + "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
            cfg.put("add_prefix_space", false);
            cfg.put("bos_token", null);
            cfg.put("eos_token", "<|im_end|>");
            cfg.put("pad_token", "<|endoftext|>");
        } else {
            template = "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
                    + "<|end_header_id|>\n\n{{ message['content'] }}<|eot_id|>{% endfor %}"
                    + "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
            cfg.put("bos_token", "<|begin_of_text|>");
            cfg.put("eos_token", "<|eot_id|>");
        }
        cfg.put("model_max_length", 512);
        cfg.put("chat_template", template);
        int size = first + specials.size();
        // Qwen2 instruct: config.json ends on <|im_end|>, generation_config.json on <|endoftext|> too;
        // Llama 3 instruct: <|end_of_text|> and <|eot_id|>
        return qwen ? new Files(tok, Json.write(cfg) + "\n", size, first, List.of(first + 2), List.of(first, first + 2))
                : new Files(tok, Json.write(cfg) + "\n", size, first, List.of(first + 1, first + 4),
                        List.of(first + 1, first + 4));
    }

    /** Llama 2 / Mistral: ▁ for spaces (Prepend + Replace), byte fallback to {@code <0xNN>}, BOS added. */
    private static Files sentencePiece() {
        List<String> vocab = new ArrayList<>(List.of("<unk>", "<s>", "</s>"));
        for (int b = 0; b < 256; b++) {
            vocab.add(String.format(java.util.Locale.ROOT, "<0x%02X>", b));
        }
        String ms = "\u2581";
        vocab.add(ms);
        for (char c = 0x21; c < 0x7f; c++) {
            vocab.add(Character.toString(c));
        }
        List<String> merges = new ArrayList<>();
        for (String m : BIGRAMS) {
            merges.add(m.charAt(0) + " " + m.charAt(1));
        }
        for (char c = 'a'; c <= 'z'; c++) {
            merges.add(ms + " " + c);
        }
        merges.addAll(List.of(ms + "t he", ms + "a nd", ms + "i s"));
        for (String m : merges) {
            String merged = m.replace(" ", "");
            if (!vocab.contains(merged)) {
                vocab.add(merged);
            }
        }
        Map<String, Object> model = bpe(vocab, merges, "<unk>", true, false);
        Map<String, Object> normalizer = Map.of("type", "Sequence", "normalizers", List.of(
                Map.of("type", "Prepend", "prepend", ms),
                Map.of("type", "Replace", "pattern", Map.of("String", " "), "content", ms)));
        Map<String, Object> decoder = Map.of("type", "Sequence", "decoders", List.of(
                Map.of("type", "Replace", "pattern", Map.of("String", ms), "content", " "),
                Map.of("type", "ByteFallback"), Map.of("type", "Fuse"),
                Map.of("type", "Strip", "content", " ", "start", 1, "stop", 0)));
        String tok = tokenizer(added(List.of("<unk>", "<s>", "</s>"), 0), normalizer, null, null, model, decoder);
        Map<String, Object> cfg = new LinkedHashMap<>();
        cfg.put("add_bos_token", true);
        cfg.put("add_eos_token", false);
        cfg.put("bos_token", "<s>");
        cfg.put("eos_token", "</s>");
        cfg.put("unk_token", "<unk>");
        cfg.put("legacy", false);
        cfg.put("model_max_length", 512);
        cfg.put("chat_template", "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}"
                + "{{ message['content'] }}</s>{% else %}[INST] {{ message['content'] }} [/INST]{% endif %}"
                + "{% endfor %}");
        return new Files(tok, Json.write(cfg) + "\n", vocab.size(), 1, List.of(2), List.of());
    }

    private static Map<String, Object> bpe(List<String> vocab, List<String> merges, String unk, boolean byteFallback,
            boolean ignoreMerges) {
        Map<String, Object> v = new LinkedHashMap<>();
        for (int i = 0; i < vocab.size(); i++) {
            v.put(vocab.get(i), i);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "BPE");
        m.put("dropout", null);
        m.put("unk_token", unk);
        m.put("continuing_subword_prefix", null);
        m.put("end_of_word_suffix", null);
        m.put("fuse_unk", byteFallback);
        m.put("byte_fallback", byteFallback);
        m.put("ignore_merges", ignoreMerges);
        m.put("vocab", v);
        m.put("merges", merges);
        return m;
    }

    private static List<Object> added(List<String> contents, int firstId) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < contents.size(); i++) {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("id", firstId + i);
            t.put("content", contents.get(i));
            t.put("single_word", false);
            t.put("lstrip", false);
            t.put("rstrip", false);
            t.put("normalized", false);
            t.put("special", true);
            out.add(t);
        }
        return out;
    }

    private static String tokenizer(List<Object> added, Object normalizer, Object pre, Object post,
            Map<String, Object> model, Object decoder) {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("version", "1.0");
        t.put("truncation", null);
        t.put("padding", null);
        t.put("added_tokens", added);
        t.put("normalizer", normalizer);
        t.put("pre_tokenizer", pre);
        t.put("post_processor", post);
        t.put("decoder", decoder);
        t.put("model", model);
        return Json.write(t) + "\n";
    }
}
