package io.mooncake4j.connector.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MooncakeBootstrapServerTest {

    private MooncakeBootstrapServer server;
    private BootstrapClient client;
    private HttpClient raw;
    private String url;

    @BeforeEach
    void start() {
        server = new MooncakeBootstrapServer("127.0.0.1", 0);
        server.start();
        url = BootstrapAddresses.httpUrl("127.0.0.1", server.port());
        client = new BootstrapClient();
        raw = HttpClient.newHttpClient();
    }

    @AfterEach
    void stop() {
        raw.close();
        client.close();
        server.close();
    }

    private HttpResponse<String> post(String path, String body) throws IOException, InterruptedException {
        return raw.send(HttpRequest.newBuilder(URI.create(url + path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return raw.send(HttpRequest.newBuilder(URI.create(url + path)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void aRegisteredKvLayoutIsReturnedInTheEngineEntryAndAnotherOneOfTheRankRefused() throws Exception {
        String layout = "llama/L2/H4/KV2/D32/F32/0123456789abcdef/T01234567/B16";
        client.register(url, new RegisterWorkerPayload("p-engine", 0, 0, 0, "tcp://10.0.0.1:5000", layout),
                Duration.ofSeconds(5));
        // a worker without one (vLLM's payload) joins the rank; the rank keeps the layout
        client.register(url, new RegisterWorkerPayload("p-engine", 0, 1, 0, "tcp://10.0.0.1:5001"), Duration.ofSeconds(5));
        client.register(url, new RegisterWorkerPayload("vllm", 1, 0, 0, "tcp://10.0.0.2:5000"), Duration.ofSeconds(5));
        assertEquals("{\"0\":{\"engine_id\":\"p-engine\",\"worker_addr\":{\"0\":{\"0\":\"tcp://10.0.0.1:5000\"},"
                + "\"1\":{\"0\":\"tcp://10.0.0.1:5001\"}},\"mooncake4j_kv_layout\":\"" + layout + "\"},"
                + "\"1\":{\"engine_id\":\"vllm\",\"worker_addr\":{\"0\":{\"0\":\"tcp://10.0.0.2:5000\"}}}}",
                get("/query").body(), "the key only where a worker registered one; vLLM's keys unchanged");
        BootstrapQueryResult r = client.query(url);
        assertEquals(layout, r.engine("p-engine").orElseThrow().kvLayout());
        assertEquals(null, r.engine("vllm").orElseThrow().kvLayout());
        assertEquals(layout, server.workers().engine("p-engine").orElseThrow().kvLayout());

        HttpResponse<String> other = post("/register", new RegisterWorkerPayload("p-engine", 0, 2, 0, "tcp://10.0.0.1:5002",
                layout.replace("F32", "BF16")).toJson());
        assertEquals(400, other.statusCode(), other.body());
        assertTrue(other.body().contains("KV layout mismatch for dp_rank=0: expected " + layout), other.body());
        HttpResponse<String> typed = post("/register", "{\"engine_id\":\"p-engine\",\"dp_rank\":0,\"tp_rank\":3,"
                + "\"pp_rank\":0,\"addr\":\"tcp://h:1\",\"mooncake4j_kv_layout\":5}");
        assertEquals(422, typed.statusCode(), typed.body());
        assertTrue(typed.body().contains("mooncake4j_kv_layout"), typed.body());
        HttpResponse<String> huge = post("/register", new RegisterWorkerPayload("p-engine", 0, 3, 0, "tcp://h:1",
                "x".repeat(MooncakeBootstrapServer.MAX_FIELD_CHARS + 1)).toJson());
        assertEquals(422, huge.statusCode(), huge.body());
        assertEquals(2, server.workers().engine("p-engine").orElseThrow().tpSize(), "nothing refused was registered");
    }

    @Test
    void registeredWorkersAreReturnedByQueryInVllmJsonShape() throws Exception {
        assertEquals("{}", get("/query").body());
        client.register(url, new RegisterWorkerPayload("p-engine", 0, 0, 0, "tcp://10.0.0.1:5000"), Duration.ofSeconds(5));
        client.register(url, new RegisterWorkerPayload("p-engine", 0, 1, 0, "tcp://10.0.0.1:5001"), Duration.ofSeconds(5));
        client.register(url, new RegisterWorkerPayload("p-engine", 0, 0, 1, "tcp://10.0.0.2:5002"), Duration.ofSeconds(5));
        client.register(url, new RegisterWorkerPayload("other", 1, 0, 0, "tcp://[::1]:5003"), Duration.ofSeconds(5));
        HttpResponse<String> q = get("/query");
        assertEquals(200, q.statusCode());
        assertEquals("application/json", q.headers().firstValue("Content-Type").orElse(""));
        assertEquals("{\"0\":{\"engine_id\":\"p-engine\",\"worker_addr\":{\"0\":{\"0\":\"tcp://10.0.0.1:5000\","
                + "\"1\":\"tcp://10.0.0.2:5002\"},\"1\":{\"0\":\"tcp://10.0.0.1:5001\"}}},"
                + "\"1\":{\"engine_id\":\"other\",\"worker_addr\":{\"0\":{\"0\":\"tcp://[::1]:5003\"}}}}", q.body());

        BootstrapQueryResult r = client.query(url);
        assertEquals(server.workers(), r);
        EngineEntry p = r.engine("p-engine").orElseThrow();
        assertEquals(2, p.tpSize());
        assertEquals(Map.of(0, "tcp://10.0.0.1:5000", 1, "tcp://10.0.0.2:5002"), p.workerAddr().get(0));
        assertEquals("tcp://[::1]:5003", r.engines().get(1).workerAddr().get(0).get(0));
        assertTrue(r.engine("missing").isEmpty());
        assertEquals(List.of("p-engine", "other"), List.copyOf(r.byEngineId().keySet()));
        assertEquals(p.workerAddr(), r.byEngineId().get("p-engine"));
    }

    @Test
    void registerAnswersOkJson() throws Exception {
        HttpResponse<String> r = post("/register", new RegisterWorkerPayload("e", 0, 0, 0, "tcp://h:1").toJson());
        assertEquals(200, r.statusCode());
        assertEquals("{\"status\":\"ok\"}", r.body());
    }

    @Test
    void duplicateRegistrationIs400WithVllmDetail() {
        client.register(url, new RegisterWorkerPayload("e", 0, 2, 1, "tcp://h:1"), Duration.ofSeconds(5));
        BootstrapException e = assertThrows(BootstrapException.class, () ->
                client.register(url, new RegisterWorkerPayload("e", 0, 2, 1, "tcp://h:2"), Duration.ofSeconds(5)));
        assertEquals(400, e.statusCode());
        assertEquals("{\"detail\":\"Worker with dp_rank=0, tp_rank=2, pp_rank=1 is already registered at tcp://h:1, "
                + "but still want to register at tcp://h:2\"}", e.responseBody());
        assertTrue(e.getMessage().contains("is already registered"), e.getMessage());
        assertEquals("tcp://h:1", server.workers().engines().get(0).workerAddr().get(2).get(1));
    }

    @Test
    void engineIdMismatchIs400WithVllmDetail() {
        client.register(url, new RegisterWorkerPayload("first", 3, 0, 0, "tcp://h:1"), Duration.ofSeconds(5));
        BootstrapException e = assertThrows(BootstrapException.class, () ->
                client.register(url, new RegisterWorkerPayload("second", 3, 1, 0, "tcp://h:2"), Duration.ofSeconds(5)));
        assertEquals(400, e.statusCode());
        assertEquals("{\"detail\":\"Engine ID mismatch for dp_rank=3: expected first, got second\"}", e.responseBody());
    }

    @Test
    void malformedBodiesAre422LikeFastApi() throws Exception {
        HttpResponse<String> notJson = post("/register", "{not json");
        assertEquals(422, notJson.statusCode());
        assertTrue(notJson.body().contains("\"type\":\"json_invalid\""), notJson.body());

        HttpResponse<String> missing = post("/register", "{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":0,\"addr\":\"a\"}");
        assertEquals(422, missing.statusCode());
        @SuppressWarnings("unchecked")
        Map<String, Object> err = (Map<String, Object>) ((List<?>) Json.parseObject(missing.body()).get("detail")).get(0);
        assertEquals("missing", err.get("type"));
        assertEquals(List.of("body", "pp_rank"), err.get("loc"));
        assertEquals("Field required", err.get("msg"));

        HttpResponse<String> wrongType = post("/register",
                "{\"engine_id\":5,\"dp_rank\":\"x\",\"tp_rank\":0,\"pp_rank\":0.5,\"addr\":\"a\"}");
        assertEquals(422, wrongType.statusCode());
        List<?> errors = (List<?>) Json.parseObject(wrongType.body()).get("detail");
        assertEquals(List.of("string_type", "int_parsing", "int_from_float"),
                errors.stream().map(o -> ((Map<?, ?>) o).get("type")).toList());

        assertEquals(422, post("/register", "[1,2]").statusCode());
        assertEquals(422, post("/register", "").statusCode());
        assertEquals("{}", get("/query").body());
    }

    @Test
    void laxIntegersAreAcceptedLikePydantic() throws Exception {
        HttpResponse<String> r = post("/register",
                "{\"engine_id\":\"e\",\"dp_rank\":\"1\",\"tp_rank\":2.0,\"pp_rank\":0,\"addr\":\"a\",\"extra\":true}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("a", server.workers().engines().get(1).workerAddr().get(2).get(0));
    }

    @Test
    void unknownPathsAndMethodsAre404And405() throws Exception {
        HttpResponse<String> nf = get("/nope");
        assertEquals(404, nf.statusCode());
        assertEquals("{\"detail\":\"Not Found\"}", nf.body());
        HttpResponse<String> na = get("/register");
        assertEquals(405, na.statusCode());
        assertEquals("{\"detail\":\"Method Not Allowed\"}", na.body());
        assertEquals(405, post("/query", "{}").statusCode());
    }

    @Test
    void concurrentRegistrationsAreAllKept() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int tp = 0; tp < 8; tp++) {
                for (int pp = 0; pp < 4; pp++) {
                    RegisterWorkerPayload p = new RegisterWorkerPayload("e", 0, tp, pp, "tcp://h:" + (tp * 10 + pp));
                    fs.add(pool.submit(() -> client.register(url, p, Duration.ofSeconds(10))));
                }
            }
            for (Future<?> f : fs) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        EngineEntry e = client.query(url).engine("e").orElseThrow();
        assertEquals(8, e.tpSize());
        e.workerAddr().values().forEach(pps -> assertEquals(4, pps.size()));
    }

    @Test
    void startIsIdempotentAndCloseStopsServingAndThreads() throws Exception {
        int port = server.port();
        server.start();
        assertEquals(port, server.port());
        server.close();
        server.close();
        assertFalse(server.isRunning());
        assertThrows(ConnectorException.class, server::start);
        assertThrows(BootstrapException.class, () -> client.query(url));
        long alive = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("mooncake-bootstrap-http-") && t.isAlive()).count();
        assertEquals(0, alive);
    }

    @Test
    void bindingAnOccupiedPortFailsWithAnActionableMessage() {
        try (MooncakeBootstrapServer second = new MooncakeBootstrapServer("127.0.0.1", server.port())) {
            ConnectorException e = assertThrows(ConnectorException.class, second::start);
            assertTrue(e.getMessage().contains("VLLM_MOONCAKE_BOOTSTRAP_PORT"), e.getMessage());
        }
    }

    @Test
    void registerGivesUpAtTheDeadlineWhileRefused() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        try (BootstrapClient c = new BootstrapClient(Duration.ofSeconds(2), Duration.ofMillis(50))) {
            long t0 = System.nanoTime();
            BootstrapException e = assertThrows(BootstrapException.class, () -> c.register(
                    BootstrapAddresses.httpUrl("127.0.0.1", port), new RegisterWorkerPayload("e", 0, 0, 0, "tcp://h:1"),
                    Duration.ofMillis(300)));
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(300));
            assertEquals(BootstrapException.NO_RESPONSE, e.statusCode());
            assertTrue(e.getMessage().contains("connection refused"), e.getMessage());
        }
    }

    @Test
    void registerRetriesUntilTheServerComesUp() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        CountDownLatch refused = new CountDownLatch(2);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (BootstrapClient c = new BootstrapClient(Duration.ofSeconds(2), Duration.ofMillis(20), refused::countDown);
                MooncakeBootstrapServer late = new MooncakeBootstrapServer("127.0.0.1", port)) {
            Future<?> f = pool.submit(() -> c.register(BootstrapAddresses.httpUrl("127.0.0.1", port),
                    new RegisterWorkerPayload("e", 0, 0, 0, "tcp://h:1"), Duration.ofSeconds(30)));
            assertTrue(refused.await(20, TimeUnit.SECONDS));
            late.start();
            f.get(30, TimeUnit.SECONDS);
            assertEquals("tcp://h:1", late.workers().engines().get(0).workerAddr().get(0).get(0));
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    @Test
    void queryRejectsAnswersOfTheWrongShape() {
        assertThrows(IllegalArgumentException.class, () -> BootstrapClient.parseQuery("{\"x\":{}}"));
        assertThrows(IllegalArgumentException.class,
                () -> BootstrapClient.parseQuery("{\"0\":{\"engine_id\":1,\"worker_addr\":{}}}"));
        assertThrows(IllegalArgumentException.class,
                () -> BootstrapClient.parseQuery("{\"0\":{\"engine_id\":\"e\",\"worker_addr\":{\"0\":{\"0\":7}}}}"));
        assertThrows(IllegalArgumentException.class, () -> BootstrapClient.parseQuery("[]"));
    }
}
