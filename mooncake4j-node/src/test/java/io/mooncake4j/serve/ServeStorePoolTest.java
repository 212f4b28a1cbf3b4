package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.TinyModelWriter;
import io.mooncake4j.sim.StoreKvPool;
import io.mooncake4j.store.FakeMaster;
import io.mooncake4j.store.connector.StoreConnectorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two {@code serve --model DIR} nodes configured as a vLLM user configures them
 * ({@code --kv-transfer-config {"kv_connector":"MooncakeStoreConnector",...}}, a {@code mooncake.json}
 * at {@code MOONCAKE_CONFIG_PATH}) on one master: B's completion of a prompt sharing A's first 272
 * tokens loads them from the pool (counted in {@code /mooncake/status} and {@code /metrics}) and its
 * greedy text equals a fresh node's.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ServeStorePoolTest {

    @TempDir
    static Path dir;
    private static HttpClient http;
    private final List<ServeNode> nodes = new ArrayList<>();

    @BeforeAll
    static void setUp() {
        TinyModelWriter.write(dir.resolve("tiny"), TinyModelWriter.Shape.tiny());
        http = HttpClient.newHttpClient();
    }

    @AfterEach
    void closeNodes() {
        for (int i = nodes.size() - 1; i >= 0; i--) {
            nodes.get(i).close();
        }
        nodes.clear();
    }

    private ServeNode start(String name, StoreConnectorConfig pool) {
        JlamaModel model = JlamaModel.load(dir.resolve("tiny"), "F32");
        MooncakeConnectorConfig cfg = MooncakeConnectorConfig.builder().kvRole(KvRole.KV_BOTH)
                .engineId(name + "-" + System.nanoTime()).protocol("tcp").numWorkers(2).hostname("127.0.0.1")
                .bootstrapPort(0).tp(0, 1).build();
        ServeOptions o = new ServeOptions(model.kvShape(16), "tiny", "127.0.0.1", 0, cfg, 64, "cpu", 0, "tcp", 512, 16,
                8192, 64, Duration.ofSeconds(10));
        ServeNode n = ServeNode.startWithModel(o, model, c -> TransferEngines.create("tcp"),
                pool == null ? null : StoreKvPool.factory(pool.withTimings(Duration.ofSeconds(2), Duration.ofMillis(200))));
        nodes.add(n);
        return n;
    }

    private static Map<String, Object> get(ServeNode n, String path) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(n.url() + path))
                .timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return Json.parseObject(r.body());
    }

    @SuppressWarnings("unchecked")
    private static String complete(ServeNode n, int[] prompt) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "tiny");
        List<Object> ids = new ArrayList<>();
        for (int t : prompt) {
            ids.add(t);
        }
        m.put("prompt", ids);
        m.put("max_tokens", 8);
        m.put("temperature", 0);
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(n.url() + "/v1/completions"))
                .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(m))).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return (String) ((Map<String, Object>) ((List<Object>) Json.parseObject(r.body()).get("choices")).getFirst())
                .get("text");
    }

    @SuppressWarnings("unchecked")
    private static long pool(ServeNode n, String counter) throws Exception {
        return ((Number) ((Map<String, Object>) get(n, "/mooncake/status").get("store_connector")).get(counter)).longValue();
    }

    private static int[] prompt(long seed, int n) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] t = new int[n];
        t[0] = 1; // the tiny model's BOS
        for (int i = 1; i < n; i++) {
            t[i] = 3 + r.nextInt(190);
        }
        return t;
    }

    @Test
    void nodeBServesAsharedPrefixFromThePoolWithAFreshNodesText() throws Exception {
        try (FakeMaster m = new FakeMaster()) {
            Path json = dir.resolve("mooncake.json");
            Files.writeString(json, "{\"metadata_server\":\"P2PHANDSHAKE\",\"master_server_address\":\"" + m.hostPort()
                    + "\",\"protocol\":\"tcp\",\"local_hostname\":\"127.0.0.1\",\"mode\":\"embedded\","
                    + "\"global_segment_size\":\"64MB\",\"local_buffer_size\":\"1MB\"}");
            Map<String, String> env = Map.of("MOONCAKE_CONFIG_PATH", json.toString());
            String kvConfig = "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\","
                    + "\"kv_connector_extra_config\":{\"cache_prefix\":\"ci\"}}";
            StoreConnectorConfig cfg = StoreConnectorConfig.from(kvConfig, env, dir.resolve("tiny").toString(), "sha256_cbor");
            assertEquals("ci@tiny@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0", cfg.namespace().prefix());
            ServeNode a = start("a", cfg);
            ServeNode b = start("b", cfg);
            ServeNode fresh = start("fresh", null);
            int[] pa = prompt(1, 320);
            int[] pb = prompt(2, 330);
            System.arraycopy(pa, 0, pb, 0, 272);
            String expected = complete(fresh, pb);
            complete(a, pa);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (pool(a, "saved_blocks") < 20) {
                assertTrue(System.nanoTime() < deadline, "A's 20 prompt blocks were not saved in time");
                LockSupport.parkNanos(5_000_000); // polls A's status, bounded by the deadline
            }
            assertEquals(expected, complete(b, pb), "B's greedy text equals a fresh node's");
            assertEquals(272, pool(b, "hit_tokens"));
            assertEquals(0, pool(b, "load_error_blocks"));
            HttpResponse<String> metrics = http.send(HttpRequest.newBuilder(URI.create(b.url() + "/metrics"))
                    .timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
            assertTrue(metrics.body().contains("mooncake_store_connector_hit_tokens{engine=\"" + b.engineId() + "\"} 272.0"),
                    metrics.body());
        }
    }
}
