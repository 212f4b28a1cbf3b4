package io.mooncake4j.serve;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One {@code POST /v1/completions} or {@code /v1/chat/completions} body, validated.
 *
 * @param chat             whether it came to the chat route
 * @param model            the model name the client asked for, or null (the served one)
 * @param prompt           the prompt's token ids
 * @param maxTokens        tokens to generate
 * @param stream           whether to answer with server-sent events
 * @param includeUsage     {@code stream_options.include_usage}: a last chunk with the usage
 * @param kvTransferParams the request's {@code kv_transfer_params}, or null
 * @param temperature      {@code temperature}, or null (greedy)
 * @param seed             {@code seed}, or null
 * @param stop             {@code stop} strings (empty when none)
 */
record CompletionRequest(boolean chat, String model, int[] prompt, int maxTokens, boolean stream,
                         boolean includeUsage, Map<String, Object> kvTransferParams, Double temperature, Long seed,
                         List<String> stop) {

    /** vLLM's default {@code max_tokens} of a completion request. */
    static final int DEFAULT_MAX_TOKENS = 16;

    /** Whether P must keep this request's KV for a decode node. */
    boolean remoteDecode() {
        return kvTransferParams != null && KvTransferParams.isTruthy(kvTransferParams.get(KvTransferParams.DO_REMOTE_DECODE));
    }

    /** Whether this request's prompt KV comes from a prefill node. */
    boolean remotePrefill() {
        return kvTransferParams != null
                && KvTransferParams.isTruthy(kvTransferParams.get(KvTransferParams.DO_REMOTE_PREFILL));
    }

    /** The transfer id, or null. */
    String transferId() {
        return kvTransferParams == null ? null : KvTransferParams.stringValue(kvTransferParams.get(KvTransferParams.TRANSFER_ID));
    }

    /**
     * Parses and validates a body for an engine of {@code role}.
     *
     * @throws OpenAiError 400 naming the field at fault
     */
    static CompletionRequest parse(String body, boolean chat, KvRole role) {
        return parse(body, chat, role, TextModel.SYNTHETIC);
    }

    /**
     * Parses and validates a body for an engine of {@code role} whose text goes through {@code text}.
     *
     * @throws OpenAiError 400 naming the field at fault
     */
    static CompletionRequest parse(String body, boolean chat, KvRole role, TextModel text) {
        Map<String, Object> m;
        try {
            m = Json.parseObject(body);
        } catch (JsonException e) {
            throw OpenAiError.badRequest(null, "the request body is not a JSON object: " + e.getMessage());
        }
        Object model = m.get("model");
        if (model != null && !(model instanceof String)) {
            throw OpenAiError.badRequest("model", "model must be a string");
        }
        int[] prompt;
        if (chat) {
            if (!(m.get("messages") instanceof List<?> messages) || messages.isEmpty()) {
                throw OpenAiError.badRequest("messages", "messages must be a non-empty list of messages");
            }
            try {
                prompt = text.encodeChat(messages);
            } catch (IllegalArgumentException e) {
                throw OpenAiError.badRequest("messages", e.getMessage());
            }
        } else {
            prompt = prompt(m.get("prompt"), text);
        }
        int maxTokens = DEFAULT_MAX_TOKENS;
        String maxKey = chat && m.get("max_completion_tokens") != null ? "max_completion_tokens" : "max_tokens";
        Object mt = m.get(maxKey);
        if (mt != null) {
            if (!(mt instanceof Long l) || l < 1 || l > Integer.MAX_VALUE) {
                throw OpenAiError.badRequest(maxKey, maxKey + " must be an integer >= 1, got " + Json.write(mt));
            }
            maxTokens = (int) (long) l;
        }
        Object n = m.get("n");
        if (n != null && !(n instanceof Long l && l == 1)) {
            throw OpenAiError.badRequest("n", "only n = 1 is supported, got " + Json.write(n));
        }
        boolean stream = bool(m, "stream");
        boolean includeUsage = false;
        Object so = m.get("stream_options");
        if (so != null) {
            if (!(so instanceof Map<?, ?> opts)) {
                throw OpenAiError.badRequest("stream_options", "stream_options must be an object");
            }
            if (!stream) {
                throw OpenAiError.badRequest("stream_options", "stream_options is only allowed with stream = true");
            }
            Object iu = opts.get("include_usage");
            if (iu != null && !(iu instanceof Boolean)) {
                throw OpenAiError.badRequest("stream_options", "stream_options.include_usage must be true or false");
            }
            includeUsage = Boolean.TRUE.equals(iu);
        }
        Map<String, Object> params = kvTransferParams(m.get("kv_transfer_params"), role);
        Double temperature = null;
        Object temp = m.get("temperature");
        if (temp != null) {
            if (!(temp instanceof Number num) || !(num.doubleValue() >= 0) || num.doubleValue() > 100) {
                throw OpenAiError.badRequest("temperature", "temperature must be a number in 0..100, got "
                        + Json.write(temp));
            }
            temperature = num.doubleValue();
        }
        Object sd = m.get("seed");
        if (sd != null && !(sd instanceof Long)) {
            throw OpenAiError.badRequest("seed", "seed must be an integer, got " + Json.write(sd));
        }
        return new CompletionRequest(chat, (String) model, prompt, maxTokens, stream, includeUsage, params,
                temperature, (Long) sd, stop(m.get("stop")));
    }

    /** {@code stop}: null, a string or a list of non-empty strings (at most 16: each is searched in every answer). */
    private static List<String> stop(Object raw) {
        List<String> out = new java.util.ArrayList<>();
        if (raw instanceof String s) {
            raw = List.of(s);
        }
        if (raw instanceof List<?> list) {
            if (list.size() > 16) {
                throw OpenAiError.badRequest("stop", "at most 16 stop strings, got " + list.size());
            }
            for (Object o : list) {
                if (!(o instanceof String s) || s.isEmpty() || s.length() > 256) {
                    throw OpenAiError.badRequest("stop", "stop must be a string or a list of non-empty strings of "
                            + "at most 256 characters, got " + Json.write(o));
                }
                out.add(s);
            }
        } else if (raw != null) {
            throw OpenAiError.badRequest("stop", "stop must be a string or a list of strings, got " + Json.write(raw));
        }
        return List.copyOf(out);
    }

    private static boolean bool(Map<String, Object> m, String key) {
        Object v = m.get(key);
        if (v == null) {
            return false;
        }
        if (!(v instanceof Boolean b)) {
            throw OpenAiError.badRequest(key, key + " must be true or false, got " + Json.write(v));
        }
        return b;
    }

    private static int[] prompt(Object p, TextModel text) {
        if (p instanceof List<?> list && list.size() == 1 && (list.getFirst() instanceof String
                || list.getFirst() instanceof List<?>)) {
            p = list.getFirst(); // a batch of one prompt
        }
        int[] tokens;
        switch (p) {
            case null -> throw OpenAiError.badRequest("prompt", "prompt is required");
            case String s -> tokens = text.encode(s);
            case List<?> list -> {
                tokens = new int[list.size()];
                for (int i = 0; i < tokens.length; i++) {
                    Object t = list.get(i);
                    if (t instanceof String || t instanceof List<?>) {
                        throw OpenAiError.badRequest("prompt", "only one prompt per request is supported");
                    }
                    if (!(t instanceof Long l) || l < 0 || l >= text.vocabSize()) {
                        throw OpenAiError.badRequest("prompt", String.format(Locale.ROOT,
                                "prompt[%d] must be a token id in 0..%d, got %s", i, text.vocabSize() - 1,
                                Json.write(t)));
                    }
                    tokens[i] = (int) (long) l;
                }
            }
            default -> throw OpenAiError.badRequest("prompt", "prompt must be a string or a list of token ids");
        }
        if (tokens.length == 0) {
            throw OpenAiError.badRequest("prompt", "the prompt is empty");
        }
        return tokens;
    }

    /** Validates {@code kv_transfer_params} the way the connector will read them, so that it never fails the engine. */
    private static Map<String, Object> kvTransferParams(Object raw, KvRole role) {
        if (raw == null) {
            return null;
        }
        if (!(raw instanceof Map<?, ?> rawMap)) {
            throw OpenAiError.badRequest("kv_transfer_params", "kv_transfer_params must be an object or null");
        }
        Map<String, Object> p = new LinkedHashMap<>();
        rawMap.forEach((k, v) -> p.put((String) k, v));
        boolean decode = KvTransferParams.isTruthy(p.get(KvTransferParams.DO_REMOTE_DECODE));
        boolean prefill = KvTransferParams.isTruthy(p.get(KvTransferParams.DO_REMOTE_PREFILL));
        if (decode && prefill) {
            throw OpenAiError.badRequest("kv_transfer_params",
                    "kv_transfer_params cannot set both do_remote_decode and do_remote_prefill");
        }
        if (decode && role == KvRole.KV_CONSUMER) {
            throw OpenAiError.badRequest("kv_transfer_params", "do_remote_decode asks for a prefill node, but this "
                    + "node is a kv_consumer: send it to a kv_producer or kv_both node");
        }
        if (prefill && role == KvRole.KV_PRODUCER) {
            throw OpenAiError.badRequest("kv_transfer_params", "do_remote_prefill asks for a decode node, but this "
                    + "node is a kv_producer: send it to a kv_consumer or kv_both node");
        }
        if (decode || prefill) {
            requireString(p, KvTransferParams.TRANSFER_ID);
        }
        if (prefill) {
            requireString(p, KvTransferParams.REMOTE_ENGINE_ID);
            String addr = requireString(p, KvTransferParams.REMOTE_BOOTSTRAP_ADDR);
            if (!addr.startsWith("http://") && !addr.startsWith("https://")) {
                throw OpenAiError.badRequest("kv_transfer_params", "kv_transfer_params.remote_bootstrap_addr must "
                        + "be the prefill node's bootstrap URL, http://host:port, got " + Json.write(addr));
            }
        }
        return p;
    }

    private static String requireString(Map<String, Object> p, String key) {
        if (!(p.get(key) instanceof String s) || s.isEmpty()) {
            throw OpenAiError.badRequest("kv_transfer_params", "kv_transfer_params." + key
                    + " must be a non-empty string, got " + Json.write(p.get(key)));
        }
        return s;
    }
}
