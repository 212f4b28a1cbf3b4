package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.TinyModelWriter;
import io.mooncake4j.proxy.DisaggProxy;
import io.mooncake4j.proxy.ProxyConfig;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A decode node refuses the KV of a prefill node of another layout (weights, dtype, layers, KV heads, head
 * size, tokenizer, block size) with HTTP 400 naming both layouts, before it admits the request, when P and D
 * are requested at once (as vLLM's proxy does) and behind our proxy; a pair of one layout decodes as before.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class KvLayoutPairingTest {

    @TempDir
    static Path dir;
    private static HttpClient http;
    private final List<AutoCloseable> open = new ArrayList<>();

    @BeforeAll
    static void setUp() throws IOException {
        TinyModelWriter.Shape tiny = TinyModelWriter.Shape.tiny();
        TinyModelWriter.write(dir.resolve("tiny"), tiny);
        TinyModelWriter.write(dir.resolve("weights"), tiny.withSeed(26));
        TinyModelWriter.write(dir.resolve("layers"), new TinyModelWriter.Shape(128, 3, 4, 2, 256, 512, 25));
        TinyModelWriter.write(dir.resolve("kvheads"), tiny.withKvHeads(4));
        TinyModelWriter.write(dir.resolve("headsize"), new TinyModelWriter.Shape(256, 2, 4, 2, 256, 512, 25));
        // the same weights behind other merge ranks: the same text gives other token ids
        TinyModelWriter.write(dir.resolve("tokenizer"), tiny);
        Path tok = dir.resolve("tokenizer").resolve("tokenizer.json");
        String t = Files.readString(tok, StandardCharsets.UTF_8);
        String swapped = t.replace("\"t h\",\"h e\",", "\"h e\",\"t h\",");
        assertNotEquals(t, swapped, "the merges to swap are where the writer puts them");
        Files.writeString(tok, swapped, StandardCharsets.UTF_8);
        http = HttpClient.newHttpClient();
    }

    @AfterAll
    static void closeClient() {
        http.close();
    }

    @AfterEach
    void close() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private ServeNode start(KvRole role, String modelDir, String dtype, int blockSize) {
        JlamaModel model = JlamaModel.load(dir.resolve(modelDir), dtype);
        MooncakeConnectorConfig cfg = MooncakeConnectorConfig.builder().kvRole(role)
                .engineId("layout-" + role.wireName() + "-" + System.nanoTime()).protocol("tcp").numWorkers(2)
                .hostname("127.0.0.1").bootstrapPort(0).abortRequestTimeout(Duration.ofSeconds(60)).tp(0, 1).build();
        ServeOptions o = new ServeOptions(model.kvShape(blockSize), "tiny", "127.0.0.1", 0, cfg, 64, "cpu", 0, "tcp",
                512, 16, 8192, 64, Duration.ofSeconds(10));
        ServeNode n = ServeNode.startWithModel(o, model, c -> TransferEngines.create("tcp"));
        open.add(n);
        return n;
    }

    static Stream<Arguments> mismatches() {
        return Stream.of(
                Arguments.of("weights", "F32", 16, "weights digest"),
                Arguments.of("tiny", "BF16", 16, "dtype F32 vs BF16"),
                Arguments.of("layers", "F32", 16, "layers L2 vs L3"),
                Arguments.of("kvheads", "F32", 16, "KV heads KV2 vs KV4"),
                Arguments.of("headsize", "F32", 16, "head size D32 vs D64"),
                Arguments.of("tokenizer", "F32", 16, "tokenizer T"),
                Arguments.of("tiny", "F32", 32, "block size B16 vs B32"));
    }

    @ParameterizedTest(name = "{3}")
    @MethodSource("mismatches")
    void aDecodeNodeOfAnotherLayoutRefusesBeforeItAdmitsTheRequest(String dModel, String dDtype, int dBlockSize,
            String difference) throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER, "tiny", "F32", 16);
        ServeNode d = start(KvRole.KV_CONSUMER, dModel, dDtype, dBlockSize);
        String pLayout = p.kvLayout();
        String dLayout = d.kvLayout();
        assertNotEquals(pLayout, dLayout);
        String prompt = "all that glitters is not gold";

        // P and D at once, as vLLM's proxy sends them: D asks P's bootstrap server for the layout P registered
        HttpResponse<String>[] answers = atOnce(p, d, prompt, "xfer-at-once-" + dModel + dDtype + dBlockSize);
        assertEquals(200, answers[0].statusCode(), "P prefills as usual: " + answers[0].body());
        assertRefused(answers[1], pLayout, dLayout, difference);
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) Json.parseObject(answers[1].body()).get("error");
        assertEquals("BadRequestError", e.get("type"), answers[1].body());

        // behind our proxy (which also sends both at once): the client gets D's 400
        HttpResponse<String> viaProxy = post(proxy(p, d), body(prompt, 8));
        assertRefused(viaProxy, pLayout, dLayout, difference);

        // nothing reached D's engine, and D keeps serving
        Map<String, Object> st = status(d);
        assertEquals(0L, st.get("finished"), st.toString());
        assertEquals(0L, st.get("failed"), st.toString());
        assertEquals(0L, st.get("kv_bytes_received"), st.toString());
        HttpResponse<String> local = post(d.url(), body(prompt, 4));
        assertEquals(200, local.statusCode(), local.body());
    }

    @Test
    void aPairOfOneLayoutDecodesAtOnceAndBehindOurProxy() throws Exception {
        ServeNode both = start(KvRole.KV_BOTH, "tiny", "F32", 16);
        ServeNode p = start(KvRole.KV_PRODUCER, "tiny", "F32", 16);
        ServeNode d = start(KvRole.KV_CONSUMER, "tiny", "F32", 16);
        assertEquals(p.kvLayout(), d.kvLayout());
        assertTrue(p.kvLayout().matches("llama/L2/H4/KV2/D32/F32/[0-9a-f]{16}/T[0-9a-f]{8}/B16"), p.kvLayout());
        String prompt = "to be or not to be";
        String want = text(post(both.url(), body(prompt, 8)));
        HttpResponse<String>[] answers = atOnce(p, d, prompt, "xfer-same-layout");
        assertEquals(200, answers[0].statusCode(), answers[0].body());
        assertEquals(want, text(answers[1]));
        assertEquals(want, text(post(proxy(p, d), body(prompt, 8))));
        // P's engine wrote D's KV over tcp: its status says which transport carried how many bytes
        Map<String, Object> pSt = status(p);
        Map<String, Object> dSt = status(d);
        long received = (Long) dSt.get("kv_bytes_received");
        assertTrue(received > 0, dSt.toString());
        @SuppressWarnings("unchecked")
        Map<String, Object> byTransport = (Map<String, Object>) pSt.get("transfer_bytes_by_transport");
        assertEquals(java.util.Set.of("tcp"), byTransport.keySet(), pSt.toString());
        assertTrue((Long) byTransport.get("tcp") >= received, pSt + " vs " + dSt);
    }

    /** Our proxy in front of {@code p} and {@code d}, once it has probed both ({@code /health} 200); its URL. */
    private String proxy(ServeNode p, ServeNode d) throws Exception {
        DisaggProxy proxy = DisaggProxy.start(ProxyConfig.builder().port(0).addPrefill(p.url(), p.bootstrapPort())
                .addDecode(d.url()).requestTimeout(Duration.ofSeconds(60)).build());
        open.add(proxy::close);
        String url = "http://127.0.0.1:" + proxy.port();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (http.send(HttpRequest.newBuilder(URI.create(url + "/health")).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.discarding()).statusCode() != 200) {
            assertTrue(System.nanoTime() < deadline, "the proxy did not become ready in 60 s");
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10)); // poll interval
        }
        return url;
    }

    @SuppressWarnings("unchecked")
    private HttpResponse<String>[] atOnce(ServeNode p, ServeNode d, String prompt, String xfer) throws Exception {
        Map<String, Object> pb = body(prompt, 1);
        pb.put("kv_transfer_params", Map.of("do_remote_decode", true, "do_remote_prefill", false, "transfer_id", xfer));
        Map<String, Object> db = body(prompt, 8);
        db.put("kv_transfer_params", Map.of("do_remote_prefill", true, "do_remote_decode", false, "transfer_id", xfer,
                "remote_engine_id", p.engineId(), "remote_bootstrap_addr", p.bootstrapUrl().orElseThrow()));
        CompletableFuture<HttpResponse<String>> pf = CompletableFuture.supplyAsync(() -> {
            try {
                return post(p.url(), pb);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        HttpResponse<String> dr = post(d.url(), db);
        return new HttpResponse[] {pf.get(60, TimeUnit.SECONDS), dr};
    }

    private static void assertRefused(HttpResponse<String> r, String pLayout, String dLayout, String difference) {
        assertEquals(400, r.statusCode(), r.body());
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) Json.parseObject(r.body()).get("error");
        String msg = String.valueOf(e.get("message"));
        assertTrue(msg.contains(pLayout) && msg.contains(dLayout), "names both layouts: " + msg);
        assertTrue(msg.contains(difference), "names what differs (" + difference + "): " + msg);
    }

    private static HttpResponse<String> post(String base, Map<String, Object> body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(base + "/v1/completions")).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(Json.write(body)))
                .build(), HttpResponse.BodyHandlers.ofString());
    }

    private static Map<String, Object> status(ServeNode n) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(n.url() + "/mooncake/status"))
                .timeout(Duration.ofSeconds(60)).GET().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return Json.parseObject(r.body());
    }

    @SuppressWarnings("unchecked")
    private static String text(HttpResponse<String> r) {
        assertEquals(200, r.statusCode(), r.body());
        return (String) ((Map<String, Object>) ((List<Object>) Json.parseObject(r.body()).get("choices")).getFirst())
                .get("text");
    }

    private static Map<String, Object> body(String prompt, int maxTokens) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "tiny");
        m.put("prompt", prompt);
        m.put("max_tokens", maxTokens);
        m.put("temperature", 0);
        return m;
    }
}
