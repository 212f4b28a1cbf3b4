package io.mooncake4j.model;

import com.github.tjake.jlama.safetensors.prompt.PromptSupport;
import com.github.tjake.jlama.safetensors.tokenizer.Tokenizer;
import com.github.tjake.jlama.safetensors.tokenizer.TokenizerModel;

import io.mooncake4j.internal.json.Json;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Jlama's {@link Tokenizer} seam over our {@link HfTokenizer}: the model is constructed with it
 * instead of Jlama's own tokenizer (which mis-tokenizes some real tokenizers: {@link HfTokenizer}), and it
 * carries the chat template of {@code tokenizer_config.json} for Jlama's {@link PromptSupport}
 * (Jinja rendering). The serving path encodes and decodes through {@link HfTokenizer} directly.
 */
final class JlamaTokenizer implements Tokenizer {

    private final HfTokenizer tokenizer;
    private final TokenizerModel model;
    private final Optional<PromptSupport> prompts;

    JlamaTokenizer(HfTokenizer tokenizer, Path dir) {
        this.tokenizer = tokenizer;
        // an empty vocabulary: the model object only carries the templates and the BOS/EOS strings
        this.model = new TokenizerModel("BPE", null, false, false, Map.of(), null, List.of());
        Path cfgFile = dir.resolve("tokenizer_config.json");
        Map<String, Object> cfg;
        try {
            cfg = Files.isRegularFile(cfgFile) ? Json.parseObject(Files.readString(cfgFile, StandardCharsets.UTF_8))
                    : Map.of();
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("cannot read " + cfgFile + ": " + e.getMessage(), e);
        }
        Map<String, String> templates = new HashMap<>();
        Object t = cfg.get("chat_template");
        if (t instanceof String s) {
            templates.put("default", s);
        } else if (t instanceof List<?> l) {
            for (Object o : l) {
                if (o instanceof Map<?, ?> m && m.get("name") instanceof String n && m.get("template") instanceof String s) {
                    templates.put(n, s);
                } else {
                    throw new IllegalArgumentException(cfgFile + ": chat_template entries must have a name and a template");
                }
            }
        } else if (t != null) {
            throw new IllegalArgumentException(cfgFile + ": chat_template must be a string or a list");
        }
        if (!templates.isEmpty()) {
            model.setPromptTemplates(templates);
        }
        model.setEosToken(tokenString(cfg.get("eos_token")));
        model.setBosToken(tokenString(cfg.get("bos_token")));
        this.prompts = templates.isEmpty() ? Optional.empty() : Optional.of(new PromptSupport(model));
    }

    /** A special token in tokenizer_config.json: a string or an AddedToken object with a content. */
    private static String tokenString(Object o) {
        if (o instanceof String s) {
            return s;
        }
        if (o instanceof Map<?, ?> m && m.get("content") instanceof String s) {
            return s;
        }
        return "";
    }

    @Override
    public List<String> tokenize(String sentence) {
        throw new UnsupportedOperationException("tokenize: encode through HfTokenizer");
    }

    @Override
    public long[] encode(String sentence) {
        return java.util.Arrays.stream(tokenizer.encode(sentence)).asLongStream().toArray();
    }

    @Override
    public String decode(long id) {
        return tokenizer.decode(new int[] {Math.toIntExact(id)}, 1);
    }

    @Override
    public String decode(long[] ids) {
        int[] t = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            t[i] = Math.toIntExact(ids[i]);
        }
        return tokenizer.decode(t, t.length);
    }

    @Override
    public Optional<PromptSupport> promptSupport() {
        return prompts;
    }

    @Override
    public TokenizerModel getModel() {
        return model;
    }
}
