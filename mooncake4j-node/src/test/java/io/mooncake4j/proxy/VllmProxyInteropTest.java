package io.mooncake4j.proxy;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.TinyModelWriter;
import io.mooncake4j.serve.ServeNode;
import io.mooncake4j.serve.ServeOptions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Our {@code serve} nodes behind vLLM's own example proxy
 * ({@code examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py}, not part of this
 * repository), with the synthetic model and with the tiny Jlama model ({@code serve --model DIR}): runs only
 * when {@code MOONCAKE4J_VLLM_PROXY} names the script and {@code /usr/bin/python3} has FastAPI, httpx and
 * uvicorn (Debian: python3-fastapi python3-httpx python3-uvicorn).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class VllmProxyInteropTest {

    /** Hands {@code FastAPI(lifespan=...)} to Starlette's router on FastAPI < 0.93 (Debian 12 has 0.92). */
    private static final String LIFESPAN_WRAPPER = String.join("\n",
            "import runpy, sys, fastapi",
            "_init = fastapi.FastAPI.__init__",
            "def _with_lifespan(self, *a, lifespan=None, **kw):",
            "    _init(self, *a, **kw)",
            "    if lifespan is not None:",
            "        self.router.lifespan_context = lifespan",
            "fastapi.FastAPI.__init__ = _with_lifespan",
            "sys.argv = sys.argv[1:]",
            "runpy.run_path(sys.argv[0], run_name='__main__')",
            "");

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A port for the Python proxy, which cannot report one the OS picked. */
    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private ServeNode node(String role) throws IOException {
        String json = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}";
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(json,
                Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0")).hostname("127.0.0.1").tp(0, 1)
                .build();
        ModelPreset m = ModelPreset.TINY;
        ServeNode n = ServeNode.start(new ServeOptions(m, m.name(), "127.0.0.1", 0, c, 256, "cpu", 0, "tcp",
                256 * m.blockSize(), 16, 4096, 256, Duration.ofSeconds(1)));
        open.add(n);
        return n;
    }

    /** A Jlama node of the tiny model in {@code model}. */
    private ServeNode modelNode(String role, Path model) {
        String json = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}";
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(json,
                Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0")).hostname("127.0.0.1").tp(0, 1).build();
        JlamaModel jm = JlamaModel.load(model, "F32");
        ServeNode n = ServeNode.startWithModel(new ServeOptions(jm.kvShape(16), "tiny", "127.0.0.1", 0, c, 64, "cpu", 0,
                "tcp", 512, 16, 8192, 64, Duration.ofSeconds(1)), jm, cfg -> TransferEngines.create("tcp"));
        open.add(n);
        return n;
    }

    /** The path of vLLM's proxy script, after the assumptions that it and Python's modules are there. */
    private static String script() throws Exception {
        String script = System.getenv("MOONCAKE4J_VLLM_PROXY");
        assumeTrue(script != null && Files.isRegularFile(Path.of(script)),
                "set MOONCAKE4J_VLLM_PROXY to vLLM's examples/disaggregated/mooncake_connector/"
                        + "mooncake_connector_proxy.py to run this test");
        Process probe = new ProcessBuilder("/usr/bin/python3", "-c", "import fastapi, httpx, uvicorn")
                .redirectErrorStream(true).start();
        assumeTrue(probe.waitFor(30, TimeUnit.SECONDS) && probe.exitValue() == 0,
                "/usr/bin/python3 lacks fastapi, httpx or uvicorn (apt-get install python3-fastapi python3-httpx "
                        + "python3-uvicorn)");
        return script;
    }

    @Test
    void modelNodesBehindVllmsProxyAnswerWhatOneNodeAnswers(@org.junit.jupiter.api.io.TempDir Path tmp)
            throws Exception {
        String script = script();
        TinyModelWriter.write(tmp.resolve("tiny"), TinyModelWriter.Shape.tiny());
        ServeNode p = modelNode("kv_producer", tmp.resolve("tiny"));
        ServeNode d = modelNode("kv_consumer", tmp.resolve("tiny"));
        ServeNode ref = modelNode("kv_both", tmp.resolve("tiny"));
        URI base = startProxy(script, p, d);
        try (HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
            String[] prompts = {"the rain in spain", "to be or not to be, that is the question", "a", "once upon a "
                    + "time there was a model that computed its prompt on one node and decoded on another"};
            for (String prompt : prompts) {
                for (boolean chat : new boolean[] {false, true}) {
                    String path = chat ? "/v1/chat/completions" : "/v1/completions";
                    String body = chat
                            ? "{\"model\":\"tiny\",\"max_tokens\":12,\"temperature\":0,\"messages\":[{\"role\":\"user\","
                                    + "\"content\":" + Json.write(prompt) + "}]}"
                            : "{\"model\":\"tiny\",\"max_tokens\":12,\"temperature\":0,\"prompt\":" + Json.write(prompt) + "}";
                    String want = answer(http, URI.create(ref.url()).resolve(path), body, chat);
                    String got = answer(http, base.resolve(path), body, chat);
                    assertEquals(want, got, (chat ? "chat " : "completion ") + Json.write(prompt));
                }
            }
        }
        HttpResponse<String> st;
        try (HttpClient http = HttpClient.newHttpClient()) {
            st = http.send(HttpRequest.newBuilder(URI.create(d.url() + "/mooncake/status")).build(),
                    HttpResponse.BodyHandlers.ofString());
        }
        Map<String, Object> status = Json.parseObject(st.body());
        assertTrue(((Number) status.get("kv_bytes_received")).longValue() > 0, "D loaded KV from P: " + st.body());
        assertEquals(0L, ((Number) status.get("failed")).longValue(), st.body());
    }

    /** The answer's text (completion) or message content (chat). */
    @SuppressWarnings("unchecked")
    private static String answer(HttpClient http, URI uri, String body, boolean chat) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(90))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        Map<String, Object> c = (Map<String, Object>) ((List<Object>) Json.parseObject(r.body()).get("choices")).getFirst();
        return chat ? (String) ((Map<String, Object>) c.get("message")).get("content") : (String) c.get("text");
    }

    @Test
    void shouldServeThroughVllmsOwnProxyWithCompletionsEqualToKvBoth() throws Exception {
        String script = script();
        ServeNode p = node("kv_producer");
        ServeNode d = node("kv_consumer");
        ServeNode ref = node("kv_both");
        URI base = startProxy(script, p, d);
        WorkloadClient c = new WorkloadClient(new WorkloadClient.Options(base, URI.create(ref.url()), "tiny", 30, 4,
                new int[] {40, 300, 700}, 2, 64, new int[] {3, 9}, 2, 5, 3, 0, null, null, Duration.ofSeconds(90), 0));
        try {
            WorkloadClient.Report r = c.run();
            assertEquals(List.of(), r.problems());
            assertEquals(30, r.ok());
            assertEquals(List.of(), c.awaitDrained(List.of(URI.create(p.url()), URI.create(d.url())),
                    Duration.ofSeconds(30)));
        } finally {
            c.close();
        }
    }

    /** Starts vLLM's proxy in front of {@code p} and {@code d} and waits until it answers; its URL. */
    private URI startProxy(String script, ServeNode p, ServeNode d) throws Exception {
        Path dir = Files.createTempDirectory("vllm-proxy");
        open.add(() -> { // closed after the proxy (reverse order): its log is complete by then
            try (var files = Files.walk(dir)) {
                for (Path f : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(f);
                }
            }
        });
        Path wrapper = Files.writeString(dir.resolve("run_with_lifespan.py"), LIFESPAN_WRAPPER);
        Path log = dir.resolve("proxy.log");
        int port = freePort();
        Process proxy = new ProcessBuilder("/usr/bin/python3", wrapper.toString(), script, "--port",
                Integer.toString(port), "--prefill", p.url(), Integer.toString(p.bootstrapPort()), "--decode", d.url())
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        open.add(() -> {
            proxy.destroy();
            if (!proxy.waitFor(10, TimeUnit.SECONDS)) {
                proxy.destroyForcibly();
            }
        });
        URI base = URI.create("http://127.0.0.1:" + port);
        try (HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            int status = 0;
            while (status != 200) {
                assertTrue(proxy.isAlive(), () -> "vLLM's proxy exited: " + read(log));
                assertTrue(System.nanoTime() < end, () -> "vLLM's proxy not ready: " + read(log));
                try {
                    status = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                            .header("Content-Type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"warm up\",\"max_tokens\":2}"))
                            .build(), HttpResponse.BodyHandlers.discarding()).statusCode();
                } catch (IOException notListeningYet) {
                    status = 0;
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            }
        }
        return base;
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return e.toString();
        }
    }
}
