package io.mooncake4j.metadata;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The metadata keys, the {@code rpc_meta} JSON, the HTTP protocol (against a local HTTP server that
 * records what it is sent and answers what a test tells it), and publishing and looking up
 * segments. The real master's metadata server is in {@code io.mooncake4j.store.HttpMetadataTest}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MetadataCodecTest {

    /** A store in memory, for {@link SegmentMetadata}. */
    static final class MapStore implements MetadataStore {
        final Map<String, String> map = new ConcurrentHashMap<>();

        @Override
        public Optional<String> get(String key) {
            return Optional.ofNullable(map.get(key));
        }

        @Override
        public void put(String key, String json) {
            map.put(key, json);
        }

        @Override
        public boolean delete(String key) {
            return map.remove(key) != null;
        }

        @Override
        public void close() {}
    }

    @Test
    void keysFollowMooncakesScheme() {
        assertEquals("mooncake/ram/127.0.0.1:15001", MetadataKeys.DEFAULT.segment("127.0.0.1:15001"));
        assertEquals("mooncake/rpc_meta/127.0.0.1:15001", MetadataKeys.DEFAULT.rpcMeta("127.0.0.1:15001"));
        // a name with a path is the rest of the key, as TransferMetadata::getFullMetadataKey has it
        assertEquals("mooncake/nvmeof/node1", MetadataKeys.DEFAULT.segment("nvmeof/node1"));
        assertEquals(MetadataKeys.DEFAULT, MetadataKeys.fromEnvironment(Map.of()));
        assertEquals("mooncake/c1/ram/h:1", MetadataKeys.fromEnvironment(Map.of("MC_METADATA_CLUSTER_ID", "c1")).segment("h:1"));
        assertEquals("mooncake/c1/rpc_meta/h:1",
                MetadataKeys.fromEnvironment(Map.of("MC_METADATA_CLUSTER_ID", "c1/")).rpcMeta("h:1"));
        assertThrows(IllegalArgumentException.class, () -> MetadataKeys.DEFAULT.segment(""));
        assertThrows(IllegalArgumentException.class, () -> new MetadataKeys("other/"));
    }

    @Test
    void keysAreEscapedAsCurlDoes() {
        assertEquals("mooncake%2Fram%2F127.0.0.1%3A15001", HttpMetadataStore.escape("mooncake/ram/127.0.0.1:15001"));
        assertEquals("a-b_c.d~e%20%2B%26%3D%C3%A9", HttpMetadataStore.escape("a-b_c.d~e +&=\u00e9"));
    }

    @Test
    void rpcMetaIsJsoncppsCompactFormAndBadOnesAreRefused() {
        RpcMeta m = new RpcMeta("10.0.0.1", 12001);
        assertEquals("{\"ip_or_host_name\":\"10.0.0.1\",\"rpc_port\":12001}", m.toJson());
        assertEquals(m, RpcMeta.parse(m.toJson()));
        assertEquals(m, RpcMeta.parse("{ \"rpc_port\" : 12001, \"ip_or_host_name\" : \"10.0.0.1\" }\n"));
        for (String bad : List.of("", "[]", "{}", "{\"ip_or_host_name\":\"h\"}", "{\"ip_or_host_name\":\"h\",\"rpc_port\":\"1\"}",
                "{\"ip_or_host_name\":\"h\",\"rpc_port\":70000}", "{\"ip_or_host_name\":\"h\",\"rpc_port\":1.5}",
                "{\"ip_or_host_name\":\"\",\"rpc_port\":1}", "{\"ip_or_host_name\":")) {
            assertThrows(MetadataException.class, () -> RpcMeta.parse(bad), bad);
        }
    }

    @Test
    void segmentsArePublishedLookedUpAndWithdrawn() {
        MapStore store = new MapStore();
        SegmentMetadata meta = new SegmentMetadata(store, MetadataKeys.DEFAULT);
        SegmentDescriptor d = SegmentDescriptor.tcp("127.0.0.1:15001", 16001,
                List.of(SegmentDescriptor.Buffer.tcp("127.0.0.1:15001", 0x7f0000000000L, 64L << 20)));
        meta.publish("127.0.0.1:15001", d, new RpcMeta("127.0.0.1", 15001));
        assertEquals(2, store.map.size(), store.map.keySet().toString());
        SegmentMetadata.Peer p = meta.lookup("127.0.0.1:15001").orElseThrow();
        assertEquals(d.buffers(), p.descriptor().buffers());
        assertEquals("127.0.0.1:16001", p.tcpDataAddress());
        // a store segment named apart from its engine is found under both names
        meta.publish("node-a:1", d, new RpcMeta("127.0.0.1", 15001));
        assertEquals(d.name(), meta.lookup("node-a:1").orElseThrow().descriptor().name());
        meta.withdraw("node-a:1", d.name());
        meta.withdraw("127.0.0.1:15001", d.name());
        assertTrue(store.map.isEmpty(), store.map.keySet().toString());
        assertTrue(meta.lookup("127.0.0.1:15001").isEmpty());
    }

    @Test
    void aDescriptorAsTheCppEnginePublishesItIsRead() {
        MapStore store = new MapStore();
        SegmentMetadata meta = new SegmentMetadata(store, MetadataKeys.DEFAULT);
        // jsoncpp's compact writer, as HTTPStoragePlugin::set sends it (no tcp_proto_version: a v1 peer)
        store.put("mooncake/ram/10.0.0.9:12345", "{\"buffers\":[{\"addr\":140230000000000,\"length\":1073741824,"
                + "\"name\":\"cpu:0\"}],\"name\":\"10.0.0.9:12345\",\"protocol\":\"tcp\",\"tcp_data_port\":15432,"
                + "\"timestamp\":\"2026-12-05 10:00:00.123456\"}");
        store.put("mooncake/rpc_meta/10.0.0.9:12345", "{\"ip_or_host_name\":\"10.0.0.9\",\"rpc_port\":12345}");
        SegmentMetadata.Peer p = meta.lookup("10.0.0.9:12345").orElseThrow();
        assertEquals(1, p.descriptor().tcpProtoVersion());
        assertEquals(140230000000000L, p.descriptor().buffers().getFirst().addr());
        assertEquals("10.0.0.9:15432", p.tcpDataAddress());
        // a descriptor without its rpc_meta, or a malformed one, is an error naming the key
        store.delete("mooncake/rpc_meta/10.0.0.9:12345");
        MetadataException e = assertThrows(MetadataException.class, () -> meta.lookup("10.0.0.9:12345"));
        assertTrue(e.getMessage().contains("mooncake/rpc_meta/10.0.0.9:12345"), e.getMessage());
        store.put("mooncake/ram/bad:1", "{\"name\":\"bad:1\"}");
        assertThrows(MetadataException.class, () -> meta.lookup("bad:1"));
    }

    /** A local HTTP server answering every request with {@code status} and {@code body}. */
    private static HttpServer server(int status, byte[] body, List<String> seen) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        s.createContext("/metadata", x -> {
            seen.add(x.getRequestMethod() + " " + x.getRequestURI().getRawQuery() + " "
                    + new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
            x.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
            try (OutputStream o = x.getResponseBody()) {
                o.write(body);
            }
        });
        s.start();
        return s;
    }

    private static String url(HttpServer s) {
        return "http://127.0.0.1:" + s.getAddress().getPort() + "/metadata";
    }

    @Test
    void theHttpProtocolIsMooncakes() throws IOException {
        List<String> seen = new CopyOnWriteArrayList<>();
        HttpServer ok = server(200, "{\"a\":1}".getBytes(StandardCharsets.UTF_8), seen);
        HttpServer missing = server(404, "metadata not found".getBytes(StandardCharsets.UTF_8), seen);
        HttpServer broken = server(500, "boom".getBytes(StandardCharsets.UTF_8), seen);
        try (HttpMetadataStore a = HttpMetadataStore.of(url(ok)); HttpMetadataStore b = HttpMetadataStore.of(url(missing));
                HttpMetadataStore c = HttpMetadataStore.of(url(broken))) {
            assertEquals(Optional.of("{\"a\":1}"), a.get("mooncake/ram/h:1"));
            a.put("mooncake/rpc_meta/h:1", "{\"x\":2}");
            assertTrue(a.delete("mooncake/ram/h:1"));
            assertEquals(List.of("GET key=mooncake%2Fram%2Fh%3A1 ", "PUT key=mooncake%2Frpc_meta%2Fh%3A1 {\"x\":2}",
                    "DELETE key=mooncake%2Fram%2Fh%3A1 "), seen);
            assertEquals(Optional.empty(), b.get("k"));
            assertFalse(b.delete("k"));
            MetadataException e = assertThrows(MetadataException.class, () -> b.put("k", "{}"));
            assertTrue(e.getMessage().contains("HTTP 404"), e.getMessage());
            e = assertThrows(MetadataException.class, () -> c.get("k"));
            assertTrue(e.getMessage().contains("HTTP 500") && e.getMessage().contains("boom"), e.getMessage());
        } finally {
            ok.stop(0);
            missing.stop(0);
            broken.stop(0);
        }
    }

    @Test
    void anOversizedAnswerIsRefusedAndADeadServerIsAnError() throws IOException {
        HttpServer huge = server(200, new byte[HttpMetadataStore.MAX_VALUE_BYTES + 1], new CopyOnWriteArrayList<>());
        int dead;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            dead = s.getLocalPort();
        }
        try (HttpMetadataStore h = HttpMetadataStore.of(url(huge));
                HttpMetadataStore d = HttpMetadataStore.of("http://127.0.0.1:" + dead + "/metadata")) {
            MetadataException e = assertThrows(MetadataException.class, () -> h.get("k"));
            assertTrue(e.getMessage().contains("longer than"), e.getMessage());
            e = assertThrows(MetadataException.class, () -> d.get("k"));
            assertTrue(e.getMessage().contains("is the metadata server running?"), e.getMessage());
        } finally {
            huge.stop(0);
        }
        for (String bad : List.of("etcd://127.0.0.1:2379", "http:///metadata", "http://h:1/metadata?key=x", "P2PHANDSHAKE")) {
            assertThrows(IllegalArgumentException.class, () -> HttpMetadataStore.of(bad), bad);
        }
    }
}
