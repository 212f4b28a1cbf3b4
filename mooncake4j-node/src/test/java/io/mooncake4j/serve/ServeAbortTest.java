package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.ClientWatch;
import io.mooncake4j.proxy.DisaggProxy;
import io.mooncake4j.proxy.ProxyConfig;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A request whose HTTP client goes away is aborted, as vLLM's server does: a request still waiting for blocks is
 * dropped (the connector told), a D request whose KV is being pulled is abandoned and its blocks are freed only
 * once no write of P can land in them, and KV that P already holds for a decode node stays held.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ServeAbortTest {

    private final List<ServeNode> nodes = new ArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    @AfterEach
    void close() {
        for (int i = nodes.size() - 1; i >= 0; i--) {
            nodes.get(i).close();
        }
        http.close();
    }

    private ServeNode start(KvRole role, Duration abortTimeout) {
        // a short drain: the first test leaves KV held for a decode node that never comes
        ServeNode n = ServeNode.start(ServeNodeTest.options(role, 1, Duration.ofSeconds(1), abortTimeout), null,
                cfg -> TransferEngines.create("mock"));
        nodes.add(n);
        return n;
    }

    private Map<String, Object> status(ServeNode n) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(n.url() + "/mooncake/status"))
                .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return Json.parseObject(r.body());
    }

    private long stat(ServeNode n, String key) {
        try {
            return (Long) status(n).get(key);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static void await(String what, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    /** A prompt of token ids that shares no block with a prompt of another {@code salt}. */
    private static Map<String, Object> body(int salt, int promptTokens, int maxTokens, Map<String, Object> params) {
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < promptTokens; i++) {
            ids.add((long) (salt * 1000 + i % 997));
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", "tiny");
        m.put("prompt", ids);
        m.put("max_tokens", maxTokens);
        if (params != null) {
            m.put("kv_transfer_params", params);
        }
        return m;
    }

    /** Sends a request on a raw connection and returns it open, without reading the answer. */
    private static Socket send(ServeNode n, Map<String, Object> body) throws IOException {
        byte[] b = Json.write(body).getBytes(StandardCharsets.UTF_8);
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", n.port()), 10_000);
        OutputStream out = s.getOutputStream();
        out.write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: " + b.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.flush();
        return s;
    }

    @Test
    void aWaitingRequestWhoseClientClosesIsAbortedAndKvHeldForDecodeStaysHeld() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER, Duration.ofSeconds(60));
        int numBlocks = p.engine().numBlocks();
        Map<String, Object> held = new HashMap<>(Map.of("do_remote_decode", true, "do_remote_prefill", false,
                "transfer_id", "xfer-held"));
        HttpResponse<String> first = http.send(HttpRequest.newBuilder(URI.create(p.url() + "/v1/completions"))
                .timeout(Duration.ofSeconds(30)).POST(HttpRequest.BodyPublishers.ofString(Json.write(body(1, 700, 1,
                        held)))).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, first.statusCode(), first.body());
        int heldBlocks = (700 + 15) / 16;
        await("P to hold the first request's KV", () -> stat(p, "holding_kv_for_decode") == 1);
        assertEquals(numBlocks - heldBlocks, stat(p, "free_blocks"));

        // the second does not fit beside the held KV: it waits; then its client closes the connection (FIN)
        Map<String, Object> second = new HashMap<>(Map.of("do_remote_decode", true, "do_remote_prefill", false,
                "transfer_id", "xfer-gone"));
        Socket s = send(p, body(2, 200, 1, second));
        await("the second request to wait for blocks", () -> stat(p, "waiting") == 1);
        s.close();
        await("the request of the closed connection to be aborted", () -> stat(p, "requests_aborted") == 1
                && stat(p, "waiting") == 0 && stat(p, "in_flight") == 0);
        Map<String, Object> st = status(p);
        assertEquals(1L, st.get("requests_failed"), st.toString());
        assertEquals(1L, st.get("requests_ok"), st.toString());
        assertEquals(1L, st.get("holding_kv_for_decode"), "an abort does not touch KV held for a decode node: " + st);
        assertEquals((long) (numBlocks - heldBlocks), st.get("free_blocks"), st.toString());
    }

    @Test
    void aDecodeRequestWhoseClientResetsIsAbandonedAndItsBlocksFreedWhenThePullEnds() throws Exception {
        Duration abortTimeout = Duration.ofSeconds(14); // above the 3-5 s a disconnect takes to be seen
        ServeNode p = start(KvRole.KV_PRODUCER, abortTimeout);
        ServeNode d = start(KvRole.KV_CONSUMER, abortTimeout);
        int numBlocks = d.engine().numBlocks();
        // D pulls a transfer P never gets a request for (P's half went elsewhere, or failed)
        Map<String, Object> params = new HashMap<>(Map.of("do_remote_prefill", true, "do_remote_decode", false,
                "remote_engine_id", p.engineId(), "remote_bootstrap_addr", p.bootstrapUrl().orElseThrow(),
                "transfer_id", "xfer-never-prefilled"));
        Socket s = send(d, body(3, 300, 8, params));
        await("D to pull the request's KV", () -> stat(d, "loading_remote_kv") == 1);
        long pullStarted = System.nanoTime();
        s.setSoLinger(true, 0);
        s.close(); // RST: the connection disappears from the TCP table
        await("D to notice the client went away", () -> stat(d, "requests_aborted") == 1);
        if (System.nanoTime() - pullStarted < abortTimeout.toNanos() / 2) {
            // P may still answer the pull and write: D keeps the blocks until the pull ended
            Map<String, Object> st = status(d);
            assertEquals(1L, st.get("loading_remote_kv"), "the pull is abandoned, not cut short: " + st);
            assertTrue((Long) st.get("free_blocks") < numBlocks, st.toString());
        }
        await("D to free every block once the pull ended", () -> stat(d, "free_blocks") == numBlocks
                && stat(d, "loading_remote_kv") == 0 && stat(d, "in_flight") == 0);
        Map<String, Object> st = status(d);
        assertEquals(1L, st.get("requests_failed"), st.toString());
        assertEquals(0L, st.get("requests_ok"), st.toString());
        assertEquals(0L, st.get("kv_bytes_received"), st.toString());
    }

    @Test
    void aClientThatLeavesTheProxyAbortsBothHalves() throws Exception {
        Duration abortTimeout = Duration.ofSeconds(14); // above the 3-5 s a disconnect takes to be seen
        ServeNode p = start(KvRole.KV_PRODUCER, abortTimeout);
        ServeNode d = start(KvRole.KV_CONSUMER, abortTimeout);
        DisaggProxy proxy = DisaggProxy.start(ProxyConfig.builder().port(0).addPrefill(p.url(), p.bootstrapPort())
                .addDecode(d.url()).requestTimeout(Duration.ofSeconds(60)).build());
        try {
            await("the proxy to be ready", () -> {
                try {
                    return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + proxy.port() + "/health"))
                            .build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
                } catch (IOException e) {
                    return false;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return true;
                }
            });
            // P's blocks are taken by KV held for a decode node, so the proxied request waits at P, and D waits for it
            HttpResponse<String> first = http.send(HttpRequest.newBuilder(URI.create(p.url() + "/v1/completions"))
                    .timeout(Duration.ofSeconds(30)).POST(HttpRequest.BodyPublishers.ofString(Json.write(body(1, 700, 1,
                            new HashMap<>(Map.of("do_remote_decode", true, "do_remote_prefill", false, "transfer_id",
                                    "xfer-held")))))).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, first.statusCode(), first.body());
            long held = System.nanoTime();
            Socket s = new Socket();
            s.connect(new InetSocketAddress("127.0.0.1", proxy.port()), 10_000);
            byte[] b = Json.write(body(2, 200, 4, null)).getBytes(StandardCharsets.UTF_8);
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + b.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(b);
            out.flush();
            await("P to queue and D to pull the proxied request", () -> stat(p, "waiting") == 1
                    && stat(d, "loading_remote_kv") == 1);
            s.close();
            // the abort is counted when it is asked for and applied at the engine's next step: wait for both
            await("P and D to notice the proxy's connections closed and P to drop its waiting request",
                    () -> stat(p, "requests_aborted") == 1 && stat(d, "requests_aborted") == 1
                            && stat(p, "waiting") == 0);
            if (System.nanoTime() - held < abortTimeout.toNanos() / 2) {
                // well before the held KV could expire: the waiting request went because of the abort, and the
                // abort did not touch the KV P holds for another decode node
                Map<String, Object> st = status(p);
                assertEquals(1L, st.get("holding_kv_for_decode"), "P kept the KV it holds for another decode: " + st);
                assertEquals(1L, st.get("requests_ok"), "only the first request completed at P: " + st);
            }
            assertEquals(1L, proxy.stats().clientsGone());
            await("D to free every block once its pull ended", () -> stat(d, "free_blocks") == d.engine().numBlocks()
                    && stat(d, "in_flight") == 0);
            assertEquals(0L, stat(d, "requests_ok"));
        } finally {
            proxy.close();
        }
    }

    @Test
    void theTcpTableParserKeepsAnEstablishedConnectionOverAClosedOneWithTheSamePorts() {
        String table = """
                  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
                   0: 0100007F:1F90 0100007F:C350 08 00000000:00000000 00:00000000 00000000     0        0 1 1
                   1: 0100007F:1F90 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 2 1
                   2: 0200007F:1F90 0100007F:C351 08 00000000:00000000 00:00000000 00000000     0        0 3 1
                   3: 00000000000000000000000001000000:1F91 00000000000000000000000001000000:C352 07 0 0 0 0 0 0 4
                """;
        Map<Long, Integer> m = new HashMap<>();
        ClientWatch.parse(table, m);
        assertEquals(3, m.size(), m.toString());
        assertEquals(0x08, m.get(ClientWatch.key(0x1F90, 0xC350)));
        assertEquals(0x01, m.get(ClientWatch.key(0x1F90, 0xC351)), "established wins over a CLOSE_WAIT with the same ports");
        assertEquals(0x07, m.get(ClientWatch.key(0x1F91, 0xC352)));
    }
}
