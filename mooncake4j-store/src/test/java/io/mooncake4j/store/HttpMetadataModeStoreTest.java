package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Store clients in HTTP metadata mode, on {@link FakeMaster} and a small in-test server of Mooncake's
 * HTTP metadata protocol: each client's engine publishes its segment there, and a client's engine
 * finds the segments of the others there (not by asking their handshake ports): a client whose peer's
 * entry is missing cannot read from it, and can once the entry is back.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HttpMetadataModeStoreTest {

    private final Map<String, String> kv = new ConcurrentHashMap<>();
    private HttpServer server;
    private String url;

    @BeforeEach
    void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/metadata", this::serve);
        server.start();
        url = "http://127.0.0.1:" + server.getAddress().getPort() + "/metadata";
    }

    @AfterEach
    void stop() {
        server.stop(0);
    }

    private void serve(HttpExchange x) throws IOException {
        try (x) {
            String q = x.getRequestURI().getRawQuery();
            String key = q == null || !q.startsWith("key=") ? null : URLDecoder.decode(q.substring(4), StandardCharsets.UTF_8);
            int status;
            String body = "";
            if (key == null) {
                status = 400;
            } else if (x.getRequestMethod().equals("GET")) {
                body = kv.getOrDefault(key, "");
                status = kv.containsKey(key) ? 200 : 404;
            } else if (x.getRequestMethod().equals("PUT")) {
                kv.put(key, new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
                status = 200;
            } else if (x.getRequestMethod().equals("DELETE")) {
                status = kv.remove(key) == null ? 404 : 200;
            } else {
                status = 405;
            }
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            x.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
            if (b.length > 0) {
                x.getResponseBody().write(b);
            }
        }
    }

    private StoreConfig http(FakeMaster m, long segment) {
        StoreConfig c = FakeMasterStoreTest.config(m, segment);
        return new StoreConfig(c.localHostname(), url, c.globalSegmentSize(), c.localBufferSize(), c.protocol(),
                c.deviceName(), c.masterServerAddress(), c.tenantId(), c.rpcTimeout(), c.pingInterval());
    }

    @Test
    void clientsFindEachOthersSegmentsInTheMetadataServer() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient holder = MooncakeStoreClient.setup(http(m, 8L << 20))) {
            String ram = "mooncake/ram/" + holder.endpoint();
            assertTrue(kv.containsKey(ram), kv.keySet().toString());
            assertTrue(kv.containsKey("mooncake/rpc_meta/" + holder.endpoint()), kv.keySet().toString());
            byte[] v = RealMasterTest.pattern(200_000, 4);
            try (MooncakeStoreClient writer = MooncakeStoreClient.setup(http(m, 0))) {
                assertEquals(0, writer.put("h", v, ReplicateConfig.defaults()));
                assertEquals(java.util.List.of(holder.getHostname()), m.placement("h"));
                assertArrayEquals(v, writer.get("h"));
            }
            // a new client's engine looks the holder up in the metadata server: without the entry the
            // read fails, with it back the read succeeds
            String saved = kv.remove(ram);
            try (MooncakeStoreClient reader = MooncakeStoreClient.setup(http(m, 0))) {
                Result<byte[]> miss = reader.getValue("h");
                assertFalse(miss.ok(), "read without the holder's entry: " + miss);
                assertEquals(ErrorCode.TRANSFER_FAIL, miss.errorCode());
                kv.put(ram, saved);
                MasterProcess.await("a read once the entry is back", () -> reader.getValue("h").ok(),
                        FakeMasterStoreTest.WAIT);
                assertArrayEquals(v, reader.get("h"));
            }
        }
        assertFalse(kv.keySet().stream().anyMatch(k -> k.startsWith("mooncake/ram/")), "entries left: " + kv.keySet());
    }
}
