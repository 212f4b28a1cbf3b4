package io.mooncake4j.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.internal.json.Json;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Our proxy in front of nodes that are not ours: {@code src/test/resources/vllm-standin/vllm_contract_node.py},
 * a small Python (FastAPI + uvicorn) stand-in for a vLLM P or D node of a Mooncake deployment that speaks the
 * vLLM contract (OpenAI routes, {@code kv_transfer_params}, P's bootstrap {@code /query} in vLLM's format with
 * two data-parallel ranks, {@code --api-key}) and refuses whatever a vLLM node would not get from vLLM's own
 * proxy. Not vLLM: no KV moves, and the pull goes over HTTP instead of ZMQ; it proves what the proxy sends —
 * fields, headers, both requests at once, DP routing, streaming — is what vLLM nodes expect. Skipped, with
 * the reason, when {@code /usr/bin/python3} lacks FastAPI, httpx or uvicorn.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ForeignNodesProxyTest {

    private static final Pattern READY = Pattern.compile("standin ready http=(\\d+) bootstrap=(\\d+)");
    private static final String KEY = "sk-standin-test";

    private final List<AutoCloseable> open = new ArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10)).build();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
        http.close();
    }

    /** A started stand-in: its HTTP port and its bootstrap port. */
    private record Node(int http, int bootstrap, Process process) {
        URI url() {
            return URI.create("http://127.0.0.1:" + http);
        }
    }

    private Node start(Path script, String role) throws Exception {
        Process p = new ProcessBuilder("/usr/bin/python3", script.toString(), "--role", role, "--dp-size", "2",
                "--api-key", KEY).redirectErrorStream(true).start();
        open.add(() -> {
            p.getOutputStream().close(); // the stand-in stops when its stdin closes
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
        });
        CompletableFuture<Matcher> ready = new CompletableFuture<>();
        StringBuilder out = new StringBuilder();
        Thread.ofVirtual().name("standin-" + role + "-out").start(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (out) {
                        out.append(line).append('\n');
                    }
                    Matcher m = READY.matcher(line);
                    if (m.find()) {
                        ready.complete(m);
                    }
                }
            } catch (IOException e) {
                ready.completeExceptionally(e);
            }
            synchronized (out) {
                ready.completeExceptionally(new IllegalStateException("the " + role + " stand-in exited: " + out));
            }
        });
        Matcher m = ready.get(60, TimeUnit.SECONDS);
        return new Node(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), p);
    }

    private static Path script() throws IOException {
        try (InputStream in = ForeignNodesProxyTest.class.getResourceAsStream("/vllm-standin/vllm_contract_node.py")) {
            assertNotNull(in, "the stand-in script is a test resource");
            Path dir = Files.createTempDirectory("vllm-standin");
            Path p = dir.resolve("vllm_contract_node.py");
            Files.write(p, in.readAllBytes());
            return p;
        }
    }

    private HttpResponse<String> post(URI base, String path, Map<String, Object> body) throws Exception {
        return http.send(HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").header("Authorization", "Bearer " + KEY)
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(body))).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** The completion text of an answer: one JSON body, or server-sent events ending with {@code [DONE]}. */
    @SuppressWarnings("unchecked")
    private static String text(HttpResponse<String> r, boolean chat, boolean stream) {
        assertEquals(200, r.statusCode(), r.body());
        if (!stream) {
            Map<String, Object> choice = ((List<Map<String, Object>>) Json.parseObject(r.body()).get("choices"))
                    .getFirst();
            return chat ? (String) ((Map<String, Object>) choice.get("message")).get("content")
                    : (String) choice.get("text");
        }
        String[] events = r.body().split("\n\n");
        assertEquals("data: [DONE]", events[events.length - 1], r.body());
        StringBuilder sb = new StringBuilder();
        boolean usage = false;
        for (int i = 0; i < events.length - 1; i++) {
            assertTrue(events[i].startsWith("data: "), events[i]);
            Map<String, Object> m = Json.parseObject(events[i].substring(6));
            List<Map<String, Object>> choices = (List<Map<String, Object>>) m.get("choices");
            if (choices.isEmpty()) {
                usage = m.containsKey("usage");
                continue;
            }
            Map<String, Object> c = choices.getFirst();
            Object piece = chat ? ((Map<String, Object>) c.get("delta")).get("content") : c.get("text");
            sb.append(piece == null ? "" : (String) piece);
        }
        assertTrue(usage, "stream_options.include_usage reached D: " + r.body());
        return sb.toString();
    }

    private static Map<String, Object> request(boolean chat, boolean stream, int i) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "standin");
        String prompt = "request " + i + ": the prefill node computes the KV of this prompt, the decode node reads it";
        if (chat) {
            m.put("messages", List.of(Map.of("role", "user", "content", prompt)));
            m.put("max_completion_tokens", 5 + i);
        } else {
            m.put("prompt", prompt);
            m.put("max_tokens", 5 + i);
        }
        m.put("temperature", 0);
        m.put("stream", stream);
        if (stream) {
            m.put("stream_options", Map.of("include_usage", true));
        }
        return m;
    }

    @SuppressWarnings("unchecked")
    private List<Map<String, Object>> log(Node n) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(n.url().resolve("/standin/log")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return (List<Map<String, Object>>) (Object) Json.parse(r.body());
    }

    @Test
    @SuppressWarnings("unchecked")
    void theProxySendsWhatVllmNodesExpect() throws Exception {
        Process probe = new ProcessBuilder("/usr/bin/python3", "-c", "import fastapi, httpx, uvicorn")
                .redirectErrorStream(true).start();
        boolean deps = probe.waitFor(30, TimeUnit.SECONDS) && probe.exitValue() == 0;
        assumeTrue(deps, "/usr/bin/python3 lacks fastapi, httpx or uvicorn (apt-get install python3-fastapi "
                + "python3-httpx python3-uvicorn): the vLLM-contract stand-in nodes cannot run");
        Path script = script();
        open.add(() -> {
            Files.deleteIfExists(script);
            Files.deleteIfExists(script.getParent());
        });
        Node p = start(script, "prefill");
        Node d = start(script, "decode");
        Map<String, Object> query = Json.parseObject(http.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + p.bootstrap() + "/query")).build(),
                HttpResponse.BodyHandlers.ofString()).body());
        List<String> engines = List.of((String) ((Map<String, Object>) query.get("0")).get("engine_id"),
                (String) ((Map<String, Object>) query.get("1")).get("engine_id"));

        DisaggProxy proxy = DisaggProxy.start(ProxyConfig.builder().port(0).addPrefill(p.url().toString(),
                p.bootstrap()).addDecode(d.url().toString()).requestTimeout(Duration.ofSeconds(60)).build());
        open.add(proxy);
        URI base = URI.create("http://127.0.0.1:" + proxy.port());
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (http.send(HttpRequest.newBuilder(base.resolve("/health")).build(),
                HttpResponse.BodyHandlers.discarding()).statusCode() != 200) {
            assertTrue(System.nanoTime() < end, "the proxy never became ready in front of the stand-ins");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
        }

        int n = 8;
        for (int i = 0; i < n; i++) {
            boolean chat = i % 4 >= 2;
            boolean stream = i % 2 == 1;
            String path = chat ? "/v1/chat/completions" : "/v1/completions";
            Map<String, Object> body = request(chat, stream, i);
            // the reference: the same body straight to D, no transfer (the stand-in answers locally)
            String expected = text(post(d.url(), path, body), chat, stream);
            assertEquals(5 + i, expected.split(" ").length - 1, expected);
            assertEquals(expected, text(post(base, path, body), chat, stream), "request " + i + " through the proxy");
        }
        Map<String, Object> unauthorized = request(false, false, 99);
        HttpResponse<String> noKey = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
                        Json.write(unauthorized))).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(401, noKey.statusCode(), "a node's 401 reaches the client: " + noKey.body());

        // what each node got: one P and one D request per client request, sharing X-Request-Id and transfer_id
        List<Map<String, Object>> pLog = log(p).stream().filter(e -> e.get("body") != null).toList();
        List<Map<String, Object>> dLog = log(d).stream()
                .filter(e -> e.get("body") != null && ((Map<?, ?>) e.get("body")).get("kv_transfer_params") != null)
                .toList();
        assertEquals(n, pLog.size(), pLog.toString());
        assertEquals(n, dLog.size(), dLog.toString());
        Map<String, Map<String, Object>> dById = new HashMap<>();
        for (Map<String, Object> e : dLog) {
            dById.put((String) ((Map<String, Object>) e.get("headers")).get("x-request-id"), e);
        }
        Set<String> ranks = new HashSet<>();
        for (Map<String, Object> pe : pLog) {
            assertEquals(200L, pe.get("answer"), pe.toString());
            Map<String, Object> ph = (Map<String, Object>) pe.get("headers");
            String id = (String) ph.get("x-request-id");
            assertNotNull(id, "P got X-Request-Id: " + ph);
            assertEquals("Bearer " + KEY, ph.get("authorization"));
            assertTrue(((String) ph.get("content-type")).startsWith("application/json"), ph.toString());
            Map<String, Object> pParams = (Map<String, Object>) ((Map<String, Object>) pe.get("body"))
                    .get("kv_transfer_params");
            assertEquals("xfer-" + id, pParams.get("transfer_id"), "transfer_id is xfer-<X-Request-Id>, as vLLM's proxy");
            String rank = (String) ph.get("x-data-parallel-rank");
            ranks.add(rank);
            Map<String, Object> de = dById.get(id);
            assertNotNull(de, "D got the request P got, with the same X-Request-Id " + id);
            assertEquals(200L, de.get("answer"), de.toString());
            Map<String, Object> dh = (Map<String, Object>) de.get("headers");
            assertEquals("Bearer " + KEY, dh.get("authorization"));
            assertFalse(dh.containsKey("x-data-parallel-rank"), "D gets no DP rank header, as from vLLM's proxy");
            Map<String, Object> dBody = (Map<String, Object>) de.get("body");
            Map<String, Object> dParams = (Map<String, Object>) dBody.get("kv_transfer_params");
            assertEquals(pParams.get("transfer_id"), dParams.get("transfer_id"));
            assertEquals(engines.get(Integer.parseInt(rank)), dParams.get("remote_engine_id"),
                    "D is told the engine of the DP rank P was sent to");
            assertEquals("http://127.0.0.1:" + p.bootstrap(), dParams.get("remote_bootstrap_addr"));
            // D gets the client's body (its stream flag, max tokens, stream_options) plus kv_transfer_params
            Map<String, Object> client = new LinkedHashMap<>(dBody);
            client.remove("kv_transfer_params");
            Map<String, Object> pBody = (Map<String, Object>) pe.get("body");
            boolean chat = client.containsKey("messages");
            int i = (int) ((Long) client.get(chat ? "max_completion_tokens" : "max_tokens") - 5);
            assertEquals(Json.parseObject(Json.write(request(chat, i % 2 == 1, i))), client, "D got the client's request " + i + " unchanged");
            assertEquals(i % 4 >= 2, chat);
            assertEquals(false, pBody.get("stream"));
            assertFalse(pBody.containsKey("stream_options"));
            assertEquals(1L, pBody.get(chat ? "max_completion_tokens" : "max_tokens"));
            // P got the same body but for the prefill-only fields
            Map<String, Object> pRest = new LinkedHashMap<>(pBody);
            Map<String, Object> dRest = new LinkedHashMap<>(client);
            for (String k : List.of("kv_transfer_params", "stream", "max_tokens", "max_completion_tokens",
                    "stream_options")) {
                pRest.remove(k);
                dRest.remove(k);
            }
            assertEquals(dRest, pRest, "P and D got the same prompt and options");
        }
        assertEquals(Set.of("0", "1"), ranks, "round robin over both DP ranks of P");
    }
}
