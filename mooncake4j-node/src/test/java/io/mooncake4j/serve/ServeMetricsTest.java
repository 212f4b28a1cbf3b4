package io.mooncake4j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.json.Json;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code GET /metrics} of in-process P and D serve nodes (micrometer-registry-prometheus is on the
 * test class path): after one disaggregated request, the connector's meters under vLLM's names,
 * the engine's counters and the side-channel counters are in the Prometheus text.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ServeMetricsTest {

    private final List<ServeNode> nodes = new ArrayList<>();
    private final HttpClient http = HttpClient.newHttpClient();

    @AfterEach
    void closeNodes() {
        for (int i = nodes.size() - 1; i >= 0; i--) {
            nodes.get(i).close();
        }
        http.close();
    }

    private ServeNodeTest.Reply post(ServeNode n, String path, Object body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(n.url() + path))
                .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body instanceof String s ? s : Json.write(body))).build(),
                HttpResponse.BodyHandlers.ofString());
        return new ServeNodeTest.Reply(r.statusCode(), r.headers().firstValue("Content-Type").orElse(""), r.body());
    }

    private ServeNode start(KvRole role) {
        ServeNode n = ServeNode.start(ServeNodeTest.options(role, 1, Duration.ofSeconds(10)), null,
                cfg -> TransferEngines.create("mock"));
        nodes.add(n);
        return n;
    }

    private HttpResponse<String> scrape(ServeNode n) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(n.url() + "/metrics")).timeout(Duration.ofSeconds(30))
                .GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    /** The value of the sample {@code name{...engine="<engine>"...}}, failing when it is missing. */
    private static double sample(String text, String name, String engine, String extraLabel) {
        Pattern p = Pattern.compile("^" + Pattern.quote(name) + "\\{([^}]*)\\} (\\S+)$", Pattern.MULTILINE);
        Matcher m = p.matcher(text);
        while (m.find()) {
            String labels = m.group(1);
            if (labels.contains("engine=\"" + engine + "\"") && (extraLabel == null || labels.contains(extraLabel))) {
                return Double.parseDouble(m.group(2));
            }
        }
        throw new AssertionError("no sample " + name + " for engine " + engine + " " + extraLabel + " in:\n" + text);
    }

    private static void await(String what, java.util.function.BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.onSpinWait();
            Thread.yield();
        }
    }

    @Test
    void aDisaggregatedRequestShowsUpInBothNodesPrometheusText() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER);
        ServeNode d = start(KvRole.KV_CONSUMER);
        ServeNodeTest.Reply pr = post(p, "/v1/completions",
                ServeNodeTest.completion(false, 1, false, ServeNodeTest.prefillParams("xfer-metrics")));
        Map<String, Object> dParams = ServeNodeTest.returnedParams(pr);
        assertEquals(200, post(d, "/v1/completions",
                ServeNodeTest.completion(false, 4, false, dParams)).status());
        // P reports the transfer in the step after it finished; its step thread adds the step's statistics to
        // kvConnectorStats() and only then hands them to the meters: wait for the scraped text itself
        java.util.concurrent.atomic.AtomicReference<HttpResponse<String>> scraped =
                new java.util.concurrent.atomic.AtomicReference<>();
        await("P's transfer statistics in its /metrics", () -> {
            try {
                scraped.set(scrape(p));
            } catch (Exception e) {
                throw new AssertionError(e);
            }
            return scraped.get().statusCode() == 200 && scraped.get().body().lines()
                    .anyMatch(l -> l.startsWith("vllm:mooncake_xfer_time_seconds_count{") && !l.endsWith(" 0.0"));
        });
        HttpResponse<String> pm = scraped.get();
        assertEquals(200, pm.statusCode(), pm.body());
        assertTrue(pm.headers().firstValue("Content-Type").orElse("").startsWith("text/plain"), pm.headers().toString());
        String pText = pm.body();
        String pe = p.engineId();
        assertEquals(1.0, sample(pText, "vllm:mooncake_xfer_time_seconds_count", pe, null));
        assertTrue(sample(pText, "vllm:mooncake_bytes_transferred_sum", pe, null) > 0, pText);
        assertEquals(0.0, sample(pText, "vllm:mooncake_num_failed_transfers_total", pe, null));
        assertEquals(sample(pText, "vllm:mooncake_bytes_transferred_sum", pe, null),
                sample(pText, "mooncake4j_engine_bytes_total", pe, "op=\"write\""),
                "the engine moved the bytes the connector reports");
        assertEquals(0.0, sample(pText, "mooncake4j_side_channel_limit_rejections_total", pe, null));
        assertEquals(0.0, sample(pText, "mooncake4j_side_channel_error_replies_total", pe, null));
        assertEquals(1.0, sample(pText, "mooncake4j_worker_healthy", pe, null));

        String dText = scrape(d).body();
        assertEquals(0.0, sample(dText, "vllm:mooncake_num_failed_recvs_total", d.engineId(), null));
        assertEquals(0.0, sample(dText, "mooncake4j_engine_failures_total", d.engineId(), "api=\"sync\""));
        assertEquals(0.0, sample(dText, "mooncake4j_side_channel_handshake_retries_total", d.engineId(), null));
    }

    @Test
    void metricsAnswersGetOnly() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER);
        ServeNodeTest.Reply r = post(p, "/metrics", "{}");
        assertEquals(405, r.status(), r.body());
    }

    /**
     * The counters an operator needs (side-channel refusals and dropped answers by reason, the bootstrap
     * server's closed connections, the front door's cut-offs) are in {@code /mooncake/status} and
     * {@code /metrics}: 4 connections more than the bootstrap server's cap show up as 4 evictions.
     */
    @Test
    void refusalsDropsEvictionsAndCutOffsAreInStatusAndMetrics() throws Exception {
        ServeNode p = start(KvRole.KV_PRODUCER);
        List<java.net.Socket> idle = new ArrayList<>();
        try {
            int cap = io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer.Limits.fromEnvironment()
                    .maxConnections();
            for (int i = 0; i < cap + 4; i++) {
                java.net.Socket s = new java.net.Socket();
                idle.add(s);
                s.connect(new java.net.InetSocketAddress("127.0.0.1", p.bootstrapPort()), 10_000);
            }
            java.util.concurrent.atomic.AtomicReference<Map<String, Object>> status =
                    new java.util.concurrent.atomic.AtomicReference<>();
            await("4 bootstrap evictions in /mooncake/status", () -> {
                try {
                    HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(p.url() + "/mooncake/status"))
                            .timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
                    status.set(Json.parseObject(r.body()));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
                Map<?, ?> side = (Map<?, ?>) status.get().get("side_channel");
                return ((Number) ((Map<?, ?>) side.get("bootstrap_connections_closed")).get("evicted")).longValue() >= 4;
            });
            Map<?, ?> side = (Map<?, ?>) status.get().get("side_channel");
            assertEquals(0L, ((Number) side.get("self_aimed_refusals")).longValue());
            assertEquals(Map.of("protocol", 0L, "peer_gone", 0L, "queue_full", 0L, "closing", 0L),
                    side.get("answers_dropped"));
            assertEquals(Map.of("header_timeout", 0L, "slow_body", 0L, "late_body", 0L, "body_evicted", 0L),
                    status.get().get("http_cut"));
            String text = scrape(p).body();
            assertTrue(sample(text, "mooncake4j_bootstrap_connections_closed_total", p.engineId(),
                    "reason=\"evicted\"") >= 4, text);
            assertEquals(0.0, sample(text, "mooncake4j_side_channel_self_aimed_refusals_total", p.engineId(), null));
            assertEquals(0.0, sample(text, "mooncake4j_side_channel_answers_dropped_total", p.engineId(),
                    "reason=\"peer_gone\""));
            assertTrue(text.contains("mooncake4j_http_cut_total{reason=\"slow_body\"} 0.0"), text);
        } finally {
            for (java.net.Socket s : idle) {
                s.close();
            }
        }
    }
}
