package io.mooncake4j.proxy;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.serve.ServeNode;
import io.mooncake4j.serve.ServeOptions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The proxy in front of real {@code serve} nodes (in this JVM, TCP transfer engine on loopback): every
 * completion, streamed or not, equals a {@code kv_both} reference node's; a P that goes away leaves the
 * rotation and the rest keeps serving, every node freeing all its blocks.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ProxyServeTest {

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    private ServeNode node(String role, int tp) throws IOException {
        String json = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}";
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(json,
                Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", "5"))
                .hostname("127.0.0.1").tp(0, tp).build();
        ModelPreset m = ModelPreset.TINY;
        int blocks = 256;
        ServeNode n = ServeNode.start(new ServeOptions(m, m.name(), "127.0.0.1", 0, c, blocks, "cpu", 0, "tcp",
                blocks * m.blockSize(), 16, 4096, 256, Duration.ofSeconds(1)));
        open.add(n);
        return n;
    }

    private DisaggProxy proxy(List<ServeNode> ps, List<ServeNode> ds) throws IOException {
        ProxyConfig.Builder b = ProxyConfig.builder().port(0).probeInterval(Duration.ofMillis(50))
                .requestTimeout(Duration.ofSeconds(60));
        ps.forEach(p -> b.addPrefill(p.url(), p.bootstrapPort()));
        ds.forEach(d -> b.addDecode(d.url()));
        DisaggProxy p = DisaggProxy.start(b.build());
        open.add(p);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!p.isReady()) {
            assertTrue(System.nanoTime() < end, "proxy not ready");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
        return p;
    }

    private static WorkloadClient.Options workload(DisaggProxy p, ServeNode ref, int requests, int killAt,
            String killedName) {
        return new WorkloadClient.Options(URI.create("http://127.0.0.1:" + p.port()), URI.create(ref.url()), "tiny",
                requests, 4, new int[] {40, 300, 700}, 2, 64, new int[] {3, 9}, 2, 5, 7, killAt, null, killedName,
                Duration.ofSeconds(90), 0);
    }

    @Test
    void shouldMatchTheKvBothReferenceThroughOneAndTwoPrefillsStreamedOrNot() throws Exception {
        ServeNode p1 = node("kv_producer", 2); // a TP 2 P in front of a TP 1 D: heterogeneous TP
        ServeNode p2 = node("kv_producer", 1);
        ServeNode d = node("kv_consumer", 1);
        ServeNode ref = node("kv_both", 1);
        DisaggProxy proxy = proxy(List.of(p1, p2), List.of(d));
        WorkloadClient c = new WorkloadClient(workload(proxy, ref, 24, 0, null));
        try {
            WorkloadClient.Report r = c.run();
            assertEquals(List.of(), r.problems());
            assertEquals(24, r.ok());
            assertEquals(0, r.wrong());
            assertEquals(12, r.ttftNanos().length, "every other request streamed");
            assertEquals(List.of(), c.awaitDrained(List.of(URI.create(p1.url()), URI.create(p2.url()),
                    URI.create(d.url())), Duration.ofSeconds(30)));
        } finally {
            c.close();
        }
        assertEquals(24, proxy.stats().succeeded());
    }

    @Test
    void shouldTakeAPrefillThatGoesAwayOutOfRotationAndKeepServingThroughTheOther() throws Exception {
        ServeNode p1 = node("kv_producer", 1);
        ServeNode p2 = node("kv_producer", 1);
        ServeNode d = node("kv_consumer", 1);
        ServeNode ref = node("kv_both", 1);
        DisaggProxy proxy = proxy(List.of(p1, p2), List.of(d));
        WorkloadClient first = new WorkloadClient(workload(proxy, ref, 8, 0, null));
        try {
            WorkloadClient.Report before = first.run();
            assertEquals(8, before.ok(), before.problems().toString());
        } finally {
            first.close();
        }
        p2.close();
        // The prober sees p2 refuse its /health and takes it out of rotation before any request fails on it.
        // (A P that dies with requests in flight fails those cleanly: DisaggProxyTest, scripts/multihost.sh.)
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        java.net.http.HttpClient http = java.net.http.HttpClient.newBuilder()
                .version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        try (http) {
            while (!http.send(java.net.http.HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + proxy.port()
                    + "/health")).build(), java.net.http.HttpResponse.BodyHandlers.ofString()).body()
                    .contains("\"url\":\"" + p2.url() + "\",\"bootstrap_addr\":\"http://127.0.0.1:"
                            + p2.bootstrapPort() + "\",\"up\":false")) {
                assertTrue(System.nanoTime() < end, "p2 still in rotation");
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
            }
        }
        WorkloadClient after = new WorkloadClient(workload(proxy, ref, 20, 0, null));
        try {
            WorkloadClient.Report r = after.run();
            assertEquals(List.of(), r.problems());
            assertEquals(20, r.ok());
            assertEquals(List.of(), after.awaitDrained(List.of(URI.create(p1.url()), URI.create(d.url())),
                    Duration.ofSeconds(30)));
        } finally {
            after.close();
        }
        assertEquals(0, proxy.stats().failedPrefill() + proxy.stats().failedDecode());
    }
}
