package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.TinyModelWriter;

import java.net.http.HttpClient;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code serve --model DIR} on each downloaded-checkpoint form {@code make-model} writes: completions and
 * chat answer text through the checkpoint's tokenizer and template, and a P and a D node requested at
 * once (as vLLM's proxy and ours do) answer what one {@code kv_both} node answers.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ServeCheckpointVariantsTest {

    @TempDir
    static Path dir;
    private static HttpClient http;
    private final List<ServeNode> nodes = new ArrayList<>();

    static Stream<Arguments> variants() {
        return Stream.of(
                Arguments.of("llama3", TinyModelWriter.Variant.llama3()),
                Arguments.of("qwen2", TinyModelWriter.Variant.qwen2()),
                Arguments.of("mistral", TinyModelWriter.Variant.mistral()),
                Arguments.of("llama2", TinyModelWriter.Variant.llama2()));
    }

    @BeforeAll
    static void setUp() {
        http = HttpClient.newHttpClient();
    }

    @AfterAll
    static void closeClient() {
        http.close();
    }

    @AfterEach
    void closeNodes() {
        for (int i = nodes.size() - 1; i >= 0; i--) {
            nodes.get(i).close();
        }
        nodes.clear();
    }

    private ServeNode start(KvRole role, Path model) {
        ServeNode n = ModelNodes.start(role, model, "m", "variant");
        nodes.add(n);
        return n;
    }

    private static HttpResponse<String> post(ServeNode n, String path, Map<String, Object> body) throws Exception {
        return ModelNodes.post(http, n, path, body);
    }

    private static Map<String, Object> body(String prompt, int maxTokens) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "m");
        m.put("prompt", prompt);
        m.put("max_tokens", maxTokens);
        m.put("temperature", 0);
        return m;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> answer(HttpResponse<String> r) {
        assertEquals(200, r.statusCode(), r.body());
        return Json.parseObject(r.body());
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> choice(HttpResponse<String> r) {
        return (Map<String, Object>) ((List<Object>) answer(r).get("choices")).getFirst();
    }

    @SuppressWarnings("unchecked")
    private static long usage(HttpResponse<String> r, String key) {
        return (Long) ((Map<String, Object>) answer(r).get("usage")).get(key);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    @SuppressWarnings("unchecked")
    void completionsChatAndPdEqualOneNode(String name, TinyModelWriter.Variant v) throws Exception {
        Path m = dir.resolve(name);
        TinyModelWriter.write(m, TinyModelWriter.Shape.tiny(), v);
        ServeNode both = start(KvRole.KV_BOTH, m);
        ServeNode p = start(KvRole.KV_PRODUCER, m);
        ServeNode d = start(KvRole.KV_CONSUMER, m);

        String prompt = "to be or not to be, that is the question \u2014 caf\u00e9";
        HttpResponse<String> r = post(both, "/v1/completions", body(prompt, 16));
        String want = (String) choice(r).get("text");
        assertEquals(16L, usage(r, "completion_tokens"), r.body());
        assertEquals(want, choice(post(both, "/v1/completions", body(prompt, 16))).get("text"), "greedy repeats");
        try (JlamaModel local = JlamaModel.load(m, "F32")) {
            assertEquals(local.encode(prompt).length, usage(r, "prompt_tokens"), "the checkpoint's tokenizer counts");
        }
        // a stream adds up to the same text, though a character may span tokens (byte-level and byte
        // fallback tokens; a random-weight model's bytes are mostly not UTF-8, replaced by U+FFFD)
        Map<String, Object> whole = body(prompt, 48);
        String wholeText = (String) choice(post(both, "/v1/completions", whole)).get("text");
        whole.put("stream", true);
        HttpResponse<String> stream = post(both, "/v1/completions", whole);
        assertEquals(200, stream.statusCode(), stream.body());
        StringBuilder joined = new StringBuilder();
        for (String line : stream.body().split("\n")) {
            if (line.startsWith("data: ") && !line.equals("data: [DONE]")) {
                List<Map<String, Object>> choices = (List<Map<String, Object>>) Json.parseObject(line.substring(6))
                        .get("choices");
                if (!choices.isEmpty()) {
                    joined.append(choices.getFirst().get("text"));
                }
            }
        }
        assertEquals(wholeText, joined.toString(), "the stream of " + name);

        Map<String, Object> chat = new LinkedHashMap<>();
        chat.put("messages", List.of(Map.of("role", "system", "content", "be brief"),
                Map.of("role", "user", "content", "hello there")));
        chat.put("max_tokens", 6);
        chat.put("temperature", 0);
        HttpResponse<String> cr = post(both, "/v1/chat/completions", chat);
        Map<String, Object> msg = (Map<String, Object>) choice(cr).get("message");
        assertEquals("assistant", msg.get("role"), cr.body());
        assertTrue(msg.get("content") instanceof String, cr.body());
        assertTrue(usage(cr, "prompt_tokens") > 4, cr.body());

        // P and D requested at once, as vLLM's proxy and ours do
        String xfer = "xfer-variant-" + name;
        Map<String, Object> pb = body(prompt, 1);
        pb.put("kv_transfer_params", Map.of("do_remote_decode", true, "do_remote_prefill", false, "transfer_id", xfer));
        Map<String, Object> db = body(prompt, 16);
        db.put("kv_transfer_params", Map.of("do_remote_prefill", true, "do_remote_decode", false, "transfer_id", xfer,
                "remote_engine_id", p.engineId(), "remote_bootstrap_addr", p.bootstrapUrl().orElseThrow()));
        CompletableFuture<HttpResponse<String>> pf = CompletableFuture.supplyAsync(() -> {
            try {
                return post(p, "/v1/completions", pb);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        HttpResponse<String> dr = post(d, "/v1/completions", db);
        assertEquals(200, pf.get(60, TimeUnit.SECONDS).statusCode());
        assertEquals(want, choice(dr).get("text"), "D's text is the single node's");
        assertEquals(16L, usage(dr, "completion_tokens"));
    }
}
