package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.http.RawHttp;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.ModelPreset;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P, D and {@code kv_both} serving nodes in this JVM on 127.0.0.1 (mock transfer engine, real
 * connector), driven over HTTP as vLLM's proxies drive vLLM nodes.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ServeNodeTest {

    private static final String PROMPT = "The Mooncake connector moves a request's KV cache from the prefill node "
            + "to the decode node; this prompt spans several blocks of sixteen tokens.";

    private static HttpClient http;
    private final List<ServeNode> nodes = new ArrayList<>();

    @BeforeAll
    static void client() {
        http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
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

    static ServeOptions options(KvRole role, int tp, Duration drain) {
        return options(role, tp, drain, Duration.ofSeconds(60));
    }

    static ServeOptions options(KvRole role, int tp, Duration drain, Duration abortTimeout) {
        MooncakeConnectorConfig cfg = MooncakeConnectorConfig.builder().kvRole(role)
                .engineId("serve-" + role.wireName() + "-" + tp + "-" + System.nanoTime()).protocol("tcp")
                .numWorkers(2).hostname("127.0.0.1").bootstrapPort(0).abortRequestTimeout(abortTimeout)
                .tp(0, tp).build();
        return new ServeOptions(ModelPreset.TINY, "tiny", "127.0.0.1", 0, cfg, 48, "cpu", 0, "mock", 48 * 16, 16,
                8192, 64, drain);
    }

    private ServeNode start(KvRole role, int tp) {
        return start(options(role, tp, Duration.ofSeconds(10)), cfg -> TransferEngines.create("mock"));
    }

    private ServeNode start(ServeOptions o, Function<MooncakeConnectorConfig, TransferEngine> engines) {
        ServeNode n = ServeNode.start(o, null, engines);
        nodes.add(n);
        return n;
    }

    record Reply(int status, String contentType, String body) {
        Map<String, Object> json() {
            return Json.parseObject(body);
        }
    }

    static Reply post(ServeNode node, String path, Object body) throws IOException, InterruptedException {
        return post(node, path, body instanceof String s ? s : Json.write(body));
    }

    static Reply post(ServeNode node, String path, String body) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(node.url() + path))
                .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        return new Reply(r.statusCode(), r.headers().firstValue("Content-Type").orElse(""), r.body());
    }

    static Reply get(String url) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30))
                .GET().build(), HttpResponse.BodyHandlers.ofString());
        return new Reply(r.statusCode(), r.headers().firstValue("Content-Type").orElse(""), r.body());
    }

    static Map<String, Object> completion(boolean chat, int maxTokens, boolean stream, Map<String, Object> params) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "tiny");
        if (chat) {
            m.put("messages", List.of(Map.of("role", "system", "content", "You are terse."),
                    Map.of("role", "user", "content", PROMPT)));
        } else {
            m.put("prompt", PROMPT);
        }
        m.put("max_tokens", maxTokens);
        m.put("stream", stream);
        if (params != null) {
            m.put("kv_transfer_params", params);
        }
        return m;
    }

    static Map<String, Object> prefillParams(String transferId) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("do_remote_decode", true);
        p.put("do_remote_prefill", false);
        p.put("transfer_id", transferId);
        return p;
    }

    /** The text of a non-streaming answer, checking its shape. */
    @SuppressWarnings("unchecked")
    static String text(Reply r, boolean chat) {
        assertEquals(200, r.status(), r.body());
        Map<String, Object> m = r.json();
        assertEquals(chat ? "chat.completion" : "text_completion", m.get("object"));
        assertTrue(((String) m.get("id")).startsWith(chat ? "chatcmpl-" : "cmpl-"), r.body());
        Map<String, Object> choice = ((List<Map<String, Object>>) m.get("choices")).getFirst();
        assertEquals("length", choice.get("finish_reason"));
        Map<String, Object> usage = (Map<String, Object>) m.get("usage");
        assertEquals((Long) usage.get("prompt_tokens") + (Long) usage.get("completion_tokens"), usage.get("total_tokens"));
        return chat ? (String) ((Map<String, Object>) choice.get("message")).get("content") : (String) choice.get("text");
    }

    /** The concatenated text of a server-sent-events answer, checking its framing. */
    @SuppressWarnings("unchecked")
    static String streamedText(Reply r, boolean chat, int maxTokens) {
        assertEquals(200, r.status(), r.body());
        assertTrue(r.contentType().startsWith("text/event-stream"), r.contentType());
        String[] events = r.body().split("\n\n");
        assertEquals("data: [DONE]", events[events.length - 1], r.body());
        StringBuilder sb = new StringBuilder();
        int tokens = 0;
        String finish = null;
        for (int i = 0; i < events.length - 1; i++) {
            assertTrue(events[i].startsWith("data: "), events[i]);
            Map<String, Object> m = Json.parseObject(events[i].substring(6));
            assertEquals(chat ? "chat.completion.chunk" : "text_completion", m.get("object"));
            Map<String, Object> choice = ((List<Map<String, Object>>) m.get("choices")).getFirst();
            if (chat) {
                Map<String, Object> delta = (Map<String, Object>) choice.get("delta");
                if (i == 0) {
                    assertEquals("assistant", delta.get("role"));
                    continue;
                }
                sb.append((String) delta.get("content"));
            } else {
                sb.append((String) choice.get("text"));
            }
            tokens++;
            finish = (String) choice.get("finish_reason");
        }
        assertEquals(maxTokens, tokens, r.body());
        assertEquals("length", finish);
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> returnedParams(Reply p) {
        assertEquals(200, p.status(), p.body());
        return (Map<String, Object>) p.json().get("kv_transfer_params");
    }

    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    private static void awaitAllBlocksFree(ServeNode n) {
        await(n.engineId() + " to free every block", () -> {
            var s = n.engine().snapshot();
            return s.freeBlocks() == n.engine().numBlocks() && s.delayedFree() == 0 && s.running() == 0
                    && s.waiting() == 0 && s.loadingRemoteKv() == 0;
        });
    }

    @Test
    void prefillThenDecodeWithPsReturnedParamsGivesTheKvBothText() throws Exception {
        ServeNode both = start(KvRole.KV_BOTH, 1);
        ServeNode p = start(KvRole.KV_PRODUCER, 1);
        ServeNode d = start(KvRole.KV_CONSUMER, 2); // heterogeneous TP: D holds two heads per rank
        assertEquals(200, get(p.url() + "/health").status());
        Map<String, Object> query = Json.parseObject(get(p.bootstrapUrl().orElseThrow() + "/query").body());
        assertEquals(p.engineId(), ((Map<?, ?>) query.get("0")).get("engine_id"), "P's bootstrap server answers /query");

        for (boolean chat : new boolean[] {false, true}) {
            String path = chat ? "/v1/chat/completions" : "/v1/completions";
            String reference = text(post(both, path, completion(chat, 6, false, null)), chat);
            assertEquals(6, reference.split(" ").length - 1, reference);
            // as a sequential proxy: P first (max_tokens=1, do_remote_decode), then D with what P returned
            Reply pr = post(p, path, completion(chat, 1, false, prefillParams("xfer-seq-" + chat)));
            assertEquals(reference.substring(0, 7), text(pr, chat), "P's one token is the first of the text");
            Map<String, Object> dParams = returnedParams(pr);
            assertEquals(Map.of("do_remote_prefill", true, "do_remote_decode", false, "remote_engine_id",
                    p.engineId(), "remote_bootstrap_addr", p.bootstrapUrl().orElseThrow(), "transfer_id",
                    "xfer-seq-" + chat), dParams);
            assertEquals(reference, text(post(d, path, completion(chat, 6, false, dParams)), chat));
            // streaming, and with D's request sent before P's as vLLM's proxy may (both concurrently)
            String tid = "xfer-stream-" + chat;
            Map<String, Object> dStream = new LinkedHashMap<>(dParams);
            dStream.put("transfer_id", tid);
            CompletableFuture<Reply> dReply = CompletableFuture.supplyAsync(() -> {
                try {
                    return post(d, path, completion(chat, 6, true, dStream));
                } catch (IOException | InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            await("D to wait for P's KV", () -> d.engine().snapshot().loadingRemoteKv() > 0);
            assertNull(returnedParams(post(both, path, completion(chat, 1, false, null))),
                    "no kv_transfer_params for a plain request");
            assertEquals(200, post(p, path, completion(chat, 1, false, prefillParams(tid))).status());
            assertEquals(reference, streamedText(dReply.get(60, TimeUnit.SECONDS), chat, 6));
        }
        awaitAllBlocksFree(p);
        awaitAllBlocksFree(d);
        Map<String, Object> dStatus = Json.parseObject(get(d.url() + "/mooncake/status").body());
        assertEquals(4L, dStatus.get("requests_ok"), dStatus.toString());
        assertEquals(0L, dStatus.get("kv_mismatched_words"));
        assertEquals((long) d.engine().numBlocks(), dStatus.get("free_blocks"));
        assertTrue((Long) dStatus.get("kv_bytes_received") > 0, dStatus.toString());
        assertTrue(((Map<?, ?>) dStatus.get("connector_stats")).containsKey("Num failed transfers"), dStatus.toString());
        Map<String, Object> pStatus = Json.parseObject(get(p.url() + "/mooncake/status").body());
        assertEquals(0L, pStatus.get("holding_kv_for_decode"));
        assertEquals(p.bootstrapPort(), ((Long) pStatus.get("bootstrap_port")).intValue());
        assertEquals(0L, p.engine().snapshot().failed());
        assertEquals(0L, d.engine().snapshot().failed());
    }

    @Test
    void aTokenIdPromptAndTheUsageChunk() throws Exception {
        ServeNode both = start(KvRole.KV_BOTH, 2);
        int[] ids = SyntheticTokenizer.encode(PROMPT);
        List<Long> list = new ArrayList<>();
        for (int t : ids) {
            list.add((long) t);
        }
        Map<String, Object> asIds = new LinkedHashMap<>(completion(false, 4, true, null));
        asIds.put("prompt", list);
        asIds.put("stream_options", Map.of("include_usage", true));
        Reply r = post(both, "/v1/completions", asIds);
        String[] events = r.body().split("\n\n");
        Map<String, Object> usage = Json.parseObject(events[events.length - 2].substring(6));
        assertEquals(List.of(), usage.get("choices"));
        assertEquals(Map.of("prompt_tokens", (long) ids.length, "total_tokens", ids.length + 4L,
                "completion_tokens", 4L), withoutNulls((Map<?, ?>) usage.get("usage")));
        assertEquals(text(post(both, "/v1/completions", completion(false, 4, false, null)), false),
                streamedTextWithUsage(r, 4), "a token-id prompt is the same prompt as its text");
        Map<String, Object> models = Json.parseObject(get(both.url() + "/v1/models").body());
        assertEquals("tiny", ((Map<?, ?>) ((List<?>) models.get("data")).getFirst()).get("id"));
    }

    private static Map<Object, Object> withoutNulls(Map<?, ?> m) {
        Map<Object, Object> out = new LinkedHashMap<>();
        m.forEach((k, v) -> {
            if (v != null) {
                out.put(k, v);
            }
        });
        return out;
    }

    private static String streamedTextWithUsage(Reply r, int maxTokens) {
        String body = r.body();
        int cut = body.lastIndexOf("data: {", body.lastIndexOf("data: [DONE]"));
        return streamedText(new Reply(r.status(), r.contentType(), body.substring(0, cut) + "data: [DONE]"), false,
                maxTokens);
    }

    /** A transfer engine that, after its first successful write, flips one bit of the destination. */
    static TransferEngine flippingFirstWrite(TransferEngine real, AtomicInteger flipped) {
        return (TransferEngine) Proxy.newProxyInstance(TransferEngine.class.getClassLoader(),
                new Class<?>[] {TransferEngine.class}, (proxy, method, args) -> {
                    Object out;
                    try {
                        out = method.invoke(real, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (method.getName().equals("batchTransferSyncWrite") && (Integer) out == 0
                            && flipped.compareAndSet(0, 1)) {
                        long dst = ((long[]) args[2])[0];
                        MemorySegment seg = MemorySegment.ofAddress(dst).reinterpret(1);
                        seg.set(ValueLayout.JAVA_BYTE, 0, (byte) (seg.get(ValueLayout.JAVA_BYTE, 0) ^ 1));
                    }
                    return out;
                });
    }

    @Test
    void oneFlippedBitOfTransferredKvChangesTheCompletion() throws Exception {
        ServeNode both = start(KvRole.KV_BOTH, 1);
        AtomicInteger flipped = new AtomicInteger();
        ServeNode p = start(options(KvRole.KV_PRODUCER, 1, Duration.ofSeconds(10)),
                cfg -> flippingFirstWrite(TransferEngines.create("mock"), flipped));
        ServeNode d = start(KvRole.KV_CONSUMER, 1);
        String reference = text(post(both, "/v1/completions", completion(false, 8, false, null)), false);
        Map<String, Object> params = returnedParams(post(p, "/v1/completions",
                completion(false, 1, false, prefillParams("xfer-flip-1"))));
        String corrupted = text(post(d, "/v1/completions", completion(false, 8, false, params)), false);
        assertEquals(1, flipped.get());
        assertNotEquals(reference, corrupted, "D decodes from the KV it holds");
        // the next transfer is clean: a prompt D has not cached gives the reference again
        Map<String, Object> other = completion(false, 8, false, null);
        other.put("prompt", "Another prompt, long enough to be sent to D in more than one block of KV.");
        String otherRef = text(post(both, "/v1/completions", other), false);
        Map<String, Object> pReq = new LinkedHashMap<>(other);
        pReq.put("max_tokens", 1);
        pReq.put("kv_transfer_params", prefillParams("xfer-flip-2"));
        Map<String, Object> dReq = new LinkedHashMap<>(other);
        dReq.put("kv_transfer_params", returnedParams(post(p, "/v1/completions", pReq)));
        assertEquals(otherRef, text(post(d, "/v1/completions", dReq), false));
    }

    private static void assertError(Reply r, int status, String type, String fragment) {
        assertEquals(status, r.status(), r.body());
        assertTrue(r.contentType().startsWith("application/json"), r.contentType());
        Map<?, ?> e = (Map<?, ?>) r.json().get("error");
        assertEquals(type, e.get("type"), r.body());
        assertEquals((long) status, e.get("code"), r.body());
        assertTrue(((String) e.get("message")).contains(fragment), r.body());
    }

    @Test
    void badRequestsGetOpenAiStyleErrors() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER, 1);
        ServeNode d = start(KvRole.KV_CONSUMER, 1);
        assertError(post(p, "/v1/completions", "{\"prompt\": "), 400, "BadRequestError", "not a JSON object");
        assertError(post(p, "/v1/completions", "[1,2]"), 400, "BadRequestError", "not a JSON object");
        assertError(post(p, "/v1/completions", "{\"max_tokens\":3}"), 400, "BadRequestError", "prompt is required");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"\"}"), 400, "BadRequestError", "the prompt is empty");
        assertError(post(p, "/v1/completions", "{\"prompt\":[1,-2]}"), 400, "BadRequestError", "prompt[1]");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":0}"), 400, "BadRequestError",
                "max_tokens must be an integer >= 1");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"n\":2}"), 400, "BadRequestError", "n = 1");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"stream\":\"yes\"}"), 400, "BadRequestError",
                "stream must be true or false");
        assertError(post(p, "/v1/chat/completions", "{\"messages\":[]}"), 400, "BadRequestError", "messages");
        assertError(post(p, "/v1/chat/completions", "{\"messages\":[{\"content\":\"x\"}]}"), 400, "BadRequestError",
                "messages[0].role");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"model\":\"gpt-9\"}"), 404, "NotFoundError",
                "The model `gpt-9` does not exist.");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":768}"), 400, "BadRequestError",
                "maximum context length is 768 tokens");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"kv_transfer_params\":{\"do_remote_decode\":true}}"),
                400, "BadRequestError", "transfer_id");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"a\",\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                + "\"transfer_id\":\"t\",\"remote_engine_id\":\"e\",\"remote_bootstrap_addr\":\"http://127.0.0.1:1\"}}"),
                400, "BadRequestError", "kv_producer");
        assertError(post(d, "/v1/completions", "{\"prompt\":\"a\",\"kv_transfer_params\":{\"do_remote_decode\":true,"
                + "\"transfer_id\":\"t\"}}"), 400, "BadRequestError", "kv_consumer");
        assertError(post(d, "/v1/completions", "{\"prompt\":\"a\",\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                + "\"transfer_id\":\"t\",\"remote_engine_id\":\"e\"}}"), 400, "BadRequestError", "remote_bootstrap_addr");
        assertError(post(p, "/v1/nothing", "{}"), 404, "NotFoundError", "no route");
        assertError(post(p, "/v1/completions", "{\"prompt\":\"" + "x".repeat(ServeNode.MAX_BODY_BYTES) + "\"}"), 413,
                "RequestEntityTooLarge", "larger than");
        assertError(get(p.url() + "/v1/completions"), 405, "MethodNotAllowed", "use POST");
        // none of that reached or hurt the engines
        assertEquals(200, post(p, "/v1/completions", "{\"prompt\":\"still fine\",\"max_tokens\":2}").status());
        assertEquals(0L, p.engine().snapshot().failed());
        assertNull(p.engine().failure());
        assertNull(d.engine().failure());
    }

    @Test
    void aClientThatSendsAnOversizedBodyWholeBeforeReadingStillGets413() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER, 1);
        int port = URI.create(p.url()).getPort();
        for (boolean chunked : new boolean[] {false, true}) {
            try (RawHttp c = new RawHttp(port)) {
                // more than the socket buffers hold: the write finishes only if the server reads it all
                c.post("/v1/completions", ServeNode.MAX_BODY_BYTES + 100_000L, chunked);
                RawHttp.Reply r = c.reply();
                assertEquals(413, r.status(), r.head());
                assertTrue(r.body().contains("RequestEntityTooLarge"), r.body());
                // the body was read away, so the connection is still good for the next request
                c.get("/health");
                assertEquals(200, c.reply().status());
            }
        }
        assertEquals(0L, p.engine().snapshot().failed());
    }

    @Test
    void drainWaitsForKvHeldForDecodeThenFreesEverything() throws Exception {
        ServeNode p = start(options(KvRole.KV_PRODUCER, 1, Duration.ofSeconds(20)),
                cfg -> TransferEngines.create("mock"));
        ServeNode d = start(KvRole.KV_CONSUMER, 1);
        Map<String, Object> params = returnedParams(post(p, "/v1/completions",
                completion(false, 1, false, prefillParams("xfer-drain"))));
        await("P to hold the KV for D", () -> p.engine().snapshot().delayedFree() == 1);
        CompletableFuture<Boolean> drained = CompletableFuture.supplyAsync(() -> p.drain(Duration.ofSeconds(30)));
        await("P to start draining", p::draining);
        assertError(get(p.url() + "/health"), 503, "ServiceUnavailableError", "shutting down");
        assertError(post(p, "/v1/completions", completion(false, 1, false, prefillParams("xfer-late"))), 503,
                "ServiceUnavailableError", "shutting down");
        assertFalse(drained.isDone(), "the drain waits for D to pull the held KV");
        assertEquals(200, post(d, "/v1/completions", completion(false, 3, false, params)).status());
        assertTrue(drained.get(30, TimeUnit.SECONDS), "drained once D pulled");
        assertEquals(p.engine().numBlocks(), p.engine().snapshot().freeBlocks());
        String bootstrap = p.bootstrapUrl().orElseThrow();
        p.close();
        assertTrue(p.engine().snapshot().freeBlocks() == p.engine().numBlocks());
        // closed: the HTTP server and the bootstrap server (P's registration with it) are gone
        assertTrue(unreachable(p.url() + "/health"));
        assertTrue(unreachable(bootstrap + "/query"));
    }

    @Test
    void kvThatNoDecodeNodePullsIsFreedAfterTheAbortTimeout() throws Exception {
        ServeNode p = start(options(KvRole.KV_PRODUCER, 2, Duration.ofSeconds(10), Duration.ofMillis(300)),
                cfg -> TransferEngines.create("mock"));
        assertEquals(200, post(p, "/v1/completions", completion(false, 1, false, prefillParams("xfer-orphan"))).status());
        assertEquals(200, post(p, "/v1/chat/completions", completion(true, 1, true, prefillParams("xfer-orphan-2")))
                .status());
        awaitAllBlocksFree(p); // VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT expired: P let go of the blocks
        assertTrue(p.drain(Duration.ofSeconds(5)));
    }

    @Test
    void requestsBeyondMaxPendingGet503AndTheOthersAreServed() throws Exception {
        ServeOptions base = options(KvRole.KV_CONSUMER, 1, Duration.ofMillis(200));
        ServeNode d = start(new ServeOptions(base.model(), base.servedModelName(), base.host(), 0, base.connector(),
                base.numBlocks(), "cpu", 0, "mock", base.maxModelLen(), 4, 8192, 1, base.drainTimeout()),
                cfg -> TransferEngines.create("mock"));
        ServeNode p = start(KvRole.KV_PRODUCER, 1);
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("do_remote_prefill", true);
        params.put("remote_engine_id", p.engineId());
        params.put("remote_bootstrap_addr", p.bootstrapUrl().orElseThrow());
        params.put("transfer_id", "xfer-pending");
        CompletableFuture<Reply> first = CompletableFuture.supplyAsync(() -> {
            try {
                return post(d, "/v1/completions", completion(false, 2, false, params));
            } catch (IOException | InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        await("D to wait for P's KV", () -> d.engine().snapshot().loadingRemoteKv() == 1);
        assertError(post(d, "/v1/completions", completion(false, 2, false, null)), 503, "ServiceUnavailableError",
                "too many requests in flight (1)");
        assertEquals(200, post(p, "/v1/completions", completion(false, 1, false, prefillParams("xfer-pending")))
                .status());
        assertEquals(200, first.get(30, TimeUnit.SECONDS).status());
        assertEquals(200, post(d, "/v1/completions", completion(false, 2, false, null)).status(), "a slot again");
    }

    @Test
    void aDrainThatTimesOutFailsTheRequestsLeftAndStillCloses() throws Exception {
        ServeNode d = start(options(KvRole.KV_CONSUMER, 1, Duration.ofMillis(200)),
                cfg -> TransferEngines.create("mock"));
        ServeNode p = start(KvRole.KV_PRODUCER, 1);
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("do_remote_prefill", true);
        params.put("remote_engine_id", p.engineId());
        params.put("remote_bootstrap_addr", p.bootstrapUrl().orElseThrow());
        params.put("transfer_id", "xfer-never-prefilled");
        CompletableFuture<Reply> waiting = CompletableFuture.supplyAsync(() -> {
            try {
                return post(d, "/v1/completions", completion(false, 2, false, params));
            } catch (IOException | InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        await("D to wait for KV that P never computes", () -> d.engine().snapshot().loadingRemoteKv() == 1);
        d.close();
        assertError(waiting.get(30, TimeUnit.SECONDS), 503, "ServiceUnavailableError", "engine stopped");
    }

    private static boolean unreachable(String url) throws InterruptedException {
        try {
            get(url);
            return false;
        } catch (IOException e) {
            return true;
        }
    }
}
