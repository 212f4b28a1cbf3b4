package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.TinyModelWriter;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code serve --model DIR} on the tiny model: real text, sampling, stop strings, streaming, usage, P/D, bad input. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ServeModelTest {

    @TempDir
    static Path dir;
    private static HttpClient http;
    private final List<ServeNode> nodes = new ArrayList<>();

    @BeforeAll
    static void setUp() {
        TinyModelWriter.write(dir.resolve("tiny"), TinyModelWriter.Shape.tiny());
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
    }

    private ServeNode start(KvRole role) {
        return start(role, "tiny");
    }

    private ServeNode start(KvRole role, String modelDir) {
        ServeNode n = ModelNodes.start(role, dir.resolve(modelDir), "tiny", "model");
        nodes.add(n);
        return n;
    }

    private static HttpResponse<String> post(ServeNode n, String path, Map<String, Object> body) throws Exception {
        return ModelNodes.post(http, n, path, body);
    }

    private static Map<String, Object> body(Object prompt, int maxTokens) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "tiny");
        m.put("prompt", prompt);
        m.put("max_tokens", maxTokens);
        m.put("temperature", 0);
        return m;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> choice(HttpResponse<String> r) {
        assertEquals(200, r.statusCode(), r.body());
        return (Map<String, Object>) ((List<Object>) Json.parseObject(r.body()).get("choices")).getFirst();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> usage(HttpResponse<String> r) {
        return (Map<String, Object>) Json.parseObject(r.body()).get("usage");
    }

    private static void assertBadRequest(HttpResponse<String> r, String text) {
        assertEquals(400, r.statusCode(), r.body());
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) Json.parseObject(r.body()).get("error");
        assertEquals("BadRequestError", m.get("type"), r.body());
        assertEquals(400L, m.get("code"), r.body());
        assertTrue(String.valueOf(m.get("message")).contains(text), r.body());
    }

    @Test
    void aRequestEndedByAStopStringIsASuccessInTheStatus() throws Exception {
        ServeNode n = start(KvRole.KV_BOTH);
        String prompt = "the rain in spain stays mainly in the plain";
        String greedy = (String) choice(post(n, "/v1/completions", body(prompt, 24))).get("text");
        String stop = greedy.substring(greedy.length() / 2, greedy.length() / 2 + 2);
        Map<String, Object> withStop = body(prompt, 24);
        withStop.put("stop", List.of(stop));
        HttpResponse<String> sr = post(n, "/v1/completions", withStop);
        assertEquals("stop", choice(sr).get("finish_reason"), sr.body());
        assertTrue((Long) usage(sr).get("completion_tokens") < 24L, "the stop ended it early: " + sr.body());
        HttpResponse<String> st = http.send(HttpRequest.newBuilder(URI.create(n.url() + "/mooncake/status"))
                .timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, st.statusCode(), st.body());
        Map<String, Object> status = Json.parseObject(st.body());
        assertEquals(2L, status.get("finished"), st.body());
        assertEquals(0L, status.get("failed"), "a stopped request is no failure: " + st.body());
        assertEquals(2L, status.get("requests_ok"), st.body());
        assertEquals(0L, status.get("requests_failed"), st.body());
    }

    @Test
    void completionsChatSamplingStopAndStreaming() throws Exception {
        ServeNode n = start(KvRole.KV_BOTH);
        String prompt = "the rain in spain stays mainly in the plain";
        Map<String, Object> c = choice(post(n, "/v1/completions", body(prompt, 24)));
        String greedy = (String) c.get("text");
        assertEquals("length", c.get("finish_reason"));
        assertEquals(24L, usage(post(n, "/v1/completions", body(prompt, 24))).get("completion_tokens"));
        assertEquals(greedy, choice(post(n, "/v1/completions", body(prompt, 24))).get("text"), "greedy is repeatable");

        Map<String, Object> seeded = body(prompt, 24);
        seeded.put("temperature", 1.0);
        seeded.put("seed", 5);
        String s1 = (String) choice(post(n, "/v1/completions", seeded)).get("text");
        assertEquals(s1, choice(post(n, "/v1/completions", seeded)).get("text"), "a seed makes sampling repeatable");
        seeded.put("seed", 6);
        assertNotEquals(s1, choice(post(n, "/v1/completions", seeded)).get("text"), "another seed, another text");

        // a stop string from the middle of the greedy text ends the answer just before it
        int cut = greedy.length() / 2;
        String stop = greedy.substring(cut, Math.min(greedy.length(), cut + 2));
        Map<String, Object> withStop = body(prompt, 24);
        withStop.put("stop", List.of(stop));
        HttpResponse<String> sr = post(n, "/v1/completions", withStop);
        Map<String, Object> sc = choice(sr);
        assertEquals("stop", sc.get("finish_reason"), sr.body());
        assertEquals(stop, sc.get("stop_reason"));
        assertEquals(greedy.substring(0, greedy.indexOf(stop)), sc.get("text"));
        assertTrue((Long) usage(sr).get("completion_tokens") < 24L, sr.body());

        // streaming: the chunks add up to the same text, then the usage and [DONE]
        Map<String, Object> st = body(prompt, 24);
        st.put("stream", true);
        st.put("stream_options", Map.of("include_usage", true));
        HttpResponse<String> stream = post(n, "/v1/completions", st);
        assertEquals(200, stream.statusCode(), stream.body());
        StringBuilder joined = new StringBuilder();
        String finish = null;
        Object streamedUsage = null;
        for (String line : stream.body().split("\n")) {
            if (!line.startsWith("data: ") || line.equals("data: [DONE]")) {
                continue;
            }
            Map<String, Object> ev = Json.parseObject(line.substring(6));
            @SuppressWarnings("unchecked")
            List<Map<String, Object>> choices = (List<Map<String, Object>>) ev.get("choices");
            if (!choices.isEmpty()) {
                joined.append(choices.getFirst().get("text"));
                finish = (String) choices.getFirst().get("finish_reason") != null
                        ? (String) choices.getFirst().get("finish_reason") : finish;
            }
            if (ev.get("usage") != null) {
                streamedUsage = ev.get("usage");
            }
        }
        assertTrue(stream.body().endsWith("data: [DONE]\n\n"), stream.body());
        assertEquals(greedy, joined.toString());
        assertEquals("length", finish);
        assertNotEquals(null, streamedUsage);

        // chat through the tokenizer config's template
        Map<String, Object> chat = new LinkedHashMap<>();
        chat.put("messages", List.of(Map.of("role", "user", "content", "hello there")));
        chat.put("max_tokens", 6);
        HttpResponse<String> cr = post(n, "/v1/chat/completions", chat);
        @SuppressWarnings("unchecked")
        Map<String, Object> msg = (Map<String, Object>) choice(cr).get("message");
        assertEquals("assistant", msg.get("role"));
        assertTrue(msg.get("content") instanceof String);
        assertEquals(6L, usage(cr).get("completion_tokens"));
        // the template's text, a beginning-of-sequence token first, at most one token per character
        long templated = "<|user|>\nhello there\n<|assistant|>\n".length() + 1;
        long promptTokens = (Long) usage(cr).get("prompt_tokens");
        assertTrue(promptTokens > 8 && promptTokens <= templated, cr.body());
    }

    @Test
    void badInputGets400AndTheNodeKeepsServing() throws Exception {
        ServeNode n = start(KvRole.KV_BOTH);
        assertBadRequest(post(n, "/v1/completions", body("hi", 0)), "max_tokens must be an integer >= 1");
        assertBadRequest(post(n, "/v1/completions", body("hi", 100_000)), "maximum context length is 512 tokens");
        assertBadRequest(post(n, "/v1/completions", body("x".repeat(600), 4)), "maximum context length is 512 tokens");
        assertBadRequest(post(n, "/v1/completions", body(List.of(1L, 5000L), 4)), "token id in 0..");
        Map<String, Object> t = body("hi", 4);
        t.put("temperature", -1);
        assertBadRequest(post(n, "/v1/completions", t), "temperature");
        Map<String, Object> s = body("hi", 4);
        s.put("stop", List.of(""));
        assertBadRequest(post(n, "/v1/completions", s), "stop");
        Map<String, Object> after = choice(post(n, "/v1/completions", body("still here", 4)));
        assertEquals("length", after.get("finish_reason"), "the node keeps serving");
    }

    @Test
    void aDecodeNodeOfAnotherModelRefusesTheKvLayoutPReturns() throws Exception {
        // another checkpoint of byte-identical KV shape (the tiny model with another seed): the connector
        // cannot tell the blocks apart, the layout P returns in its kv_transfer_params can
        TinyModelWriter.write(dir.resolve("tiny-26"), TinyModelWriter.Shape.tiny().withSeed(26));
        ServeNode both = start(KvRole.KV_BOTH);
        ServeNode p = start(KvRole.KV_PRODUCER);
        ServeNode d = start(KvRole.KV_CONSUMER);
        ServeNode other = start(KvRole.KV_CONSUMER, "tiny-26");
        String prompt = "all that glitters is not gold";
        String want = (String) choice(post(both, "/v1/completions", body(prompt, 12))).get("text");
        // as a proxy that forwards P's answer does: P first, then D with the parameters P returned
        for (String xfer : List.of("xfer-layout-same", "xfer-layout-other")) {
            Map<String, Object> pb = body(prompt, 1);
            pb.put("kv_transfer_params", Map.of("do_remote_decode", true, "do_remote_prefill", false,
                    "transfer_id", xfer));
            HttpResponse<String> pr = post(p, "/v1/completions", pb);
            assertEquals(200, pr.statusCode(), pr.body());
            @SuppressWarnings("unchecked")
            Map<String, Object> returned = (Map<String, Object>) Json.parseObject(pr.body()).get("kv_transfer_params");
            assertEquals(p.engineId(), returned.get("remote_engine_id"), pr.body());
            assertTrue(String.valueOf(returned.get("mooncake4j_kv_layout")).startsWith("llama/L2/H4/KV2/D32/F32/"),
                    pr.body());
            Map<String, Object> db = body(prompt, 12);
            db.put("kv_transfer_params", returned);
            if (xfer.endsWith("same")) {
                assertEquals(want, choice(post(d, "/v1/completions", db)).get("text"), "same model: D decodes");
            } else {
                HttpResponse<String> refused = post(other, "/v1/completions", db);
                assertBadRequest(refused, "KV layout");
                assertTrue(refused.body().contains(String.valueOf(returned.get("mooncake4j_kv_layout"))),
                        "the refusal names P's layout: " + refused.body());
                // and it keeps serving
                assertEquals("length", choice(post(other, "/v1/completions", body(prompt, 4))).get("finish_reason"));
            }
        }
    }

    @Test
    void decodeNodeAnswersWhatOneNodeAnswers() throws Exception {
        ServeNode both = start(KvRole.KV_BOTH);
        ServeNode p = start(KvRole.KV_PRODUCER);
        ServeNode d = start(KvRole.KV_CONSUMER);
        String prompt = "to be or not to be, that is the question";
        String want = (String) choice(post(both, "/v1/completions", body(prompt, 16))).get("text");
        String xfer = "xfer-model-1";
        Map<String, Object> pb = body(prompt, 1);
        pb.put("kv_transfer_params", Map.of("do_remote_decode", true, "do_remote_prefill", false, "transfer_id", xfer));
        Map<String, Object> db = body(prompt, 16);
        db.put("kv_transfer_params", Map.of("do_remote_prefill", true, "do_remote_decode", false, "transfer_id", xfer,
                "remote_engine_id", p.engineId(), "remote_bootstrap_addr", p.bootstrapUrl().orElseThrow()));
        var pf = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return post(p, "/v1/completions", pb);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        HttpResponse<String> dr = post(d, "/v1/completions", db);
        assertEquals(200, pf.get(60, TimeUnit.SECONDS).statusCode());
        assertEquals(want, choice(dr).get("text"), "D's text is the single node's");
        assertEquals(16L, usage(dr).get("completion_tokens"));
    }
}
