package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.testlog.LogCapture;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * Two TCP engines in Mooncake's HTTP metadata mode against a small in-test metadata server
 * (GET/PUT/DELETE {@code /metadata?key=...}): they publish their descriptors there, find each other
 * by segment name through it, move bytes both ways, and withdraw their entries on close.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HttpMetadataModeTest {

    private static final long LEN = 64 << 10;

    private final Map<String, String> kv = new ConcurrentHashMap<>();
    private final List<CoreEngine> engines = new ArrayList<>();
    private HttpServer server;
    private String url;
    private HostMemoryAllocator alloc;

    @BeforeEach
    void setUp() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/metadata", this::serve);
        server.start();
        url = "http://127.0.0.1:" + server.getAddress().getPort() + "/metadata";
        alloc = new HostMemoryAllocator();
    }

    @AfterEach
    void tearDown() {
        for (CoreEngine e : engines) {
            e.close();
        }
        alloc.close();
        server.stop(0);
    }

    private void serve(HttpExchange x) throws IOException {
        try (x) {
            String q = x.getRequestURI().getRawQuery();
            if (q == null || !q.startsWith("key=")) {
                reply(x, 400, "no key");
                return;
            }
            String key = URLDecoder.decode(q.substring(4), StandardCharsets.UTF_8);
            switch (x.getRequestMethod()) {
                case "GET" -> {
                    String v = kv.get(key);
                    reply(x, v == null ? 404 : 200, v == null ? "not found" : v);
                }
                case "PUT" -> {
                    kv.put(key, new String(x.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
                    reply(x, 200, "ok");
                }
                case "DELETE" -> reply(x, kv.remove(key) == null ? 404 : 200, "");
                default -> reply(x, 405, "method");
            }
        }
    }

    private static void reply(HttpExchange x, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        x.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
        if (b.length > 0) {
            x.getResponseBody().write(b);
        }
    }

    private CoreEngine started() {
        CoreEngine e = TcpEngines.alone(TcpEngines.config());
        engines.add(e);
        assertEquals(0, e.initialize("127.0.0.1", url, "tcp", ""), () -> e.lastError());
        return e;
    }

    @Test
    void enginesFindEachOtherThroughTheServerAndMoveBytesBothWays() {
        CoreEngine a = started();
        CoreEngine b = started();
        HostMemoryStorage la = alloc.allocate(LEN);
        HostMemoryStorage lb = alloc.allocate(LEN);
        HostMemoryStorage back = alloc.allocate(LEN);
        for (long i = 0; i < LEN; i += 8) {
            la.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31 + 7);
        }
        assertEquals(0, a.registerMemory(la.address(), LEN, "cpu:0"));
        assertEquals(0, a.registerMemory(back.address(), LEN, "cpu:0"));
        assertEquals(0, b.registerMemory(lb.address(), LEN, "cpu:0"));

        // b's published descriptor carries its buffer: registration re-published it
        String bKey = "mooncake/ram/" + b.getLocalSegmentName();
        assertTrue(kv.get(bKey).contains("\"addr\":" + lb.address()), kv.get(bKey));

        long sb = a.openSegment(b.getLocalSegmentName());
        assertTrue(sb > 0);
        assertEquals(lb.address(), a.getFirstBufferAddress(b.getLocalSegmentName()));
        assertEquals(0, a.batchTransferSyncWrite(b.getLocalSegmentName(), new long[] {la.address()},
                new long[] {lb.address()}, new long[] {LEN}));
        assertArrayEquals(la.segment().toArray(ValueLayout.JAVA_BYTE), lb.segment().toArray(ValueLayout.JAVA_BYTE));

        // the other way: b opens a by name and reads a's first buffer into its own
        HostMemoryStorage lb2 = alloc.allocate(LEN);
        assertEquals(0, b.registerMemory(lb2.address(), LEN, "cpu:0"));
        assertEquals(0, b.batchTransferSyncRead(a.getLocalSegmentName(), new long[] {lb2.address()},
                new long[] {la.address()}, new long[] {LEN}));
        assertArrayEquals(la.segment().toArray(ValueLayout.JAVA_BYTE), lb2.segment().toArray(ValueLayout.JAVA_BYTE));
        // and a reads it back from b into its second buffer
        assertEquals(0, a.batchTransferSyncRead(b.getLocalSegmentName(), new long[] {back.address()},
                new long[] {lb2.address()}, new long[] {LEN}));
        assertArrayEquals(la.segment().toArray(ValueLayout.JAVA_BYTE), back.segment().toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void descriptorIsPublishedInTheCppShapeAndWithdrawnOnClose() throws Exception {
        CoreEngine a = started();
        HostMemoryStorage m = alloc.allocate(LEN);
        assertEquals(0, a.registerMemory(m.address(), LEN, "cpu:0"));
        String name = a.getLocalSegmentName();
        String desc = kv.get("mooncake/ram/" + name);
        SegmentDescriptor d = SegmentDescriptor.parse(desc);
        assertEquals(name, d.name());
        assertEquals("tcp", d.protocol());
        assertEquals(1, d.buffers().size());
        assertEquals(m.address(), d.buffers().get(0).addr());
        // the handshake's JSON byte for byte, but for the time each was built
        String stamp = "\"timestamp\":\"[^\"]*\"";
        assertEquals(a.localDescriptor().toJson().replaceAll(stamp, "T"), desc.replaceAll(stamp, "T"));
        assertTrue(java.util.regex.Pattern.compile(stamp).matcher(desc).find(), desc);
        Map<String, Object> rpc = Json.parseObject(kv.get("mooncake/rpc_meta/" + name));
        assertEquals("127.0.0.1", rpc.get("ip_or_host_name"));
        assertEquals((long) a.getRpcPort(), ((Number) rpc.get("rpc_port")).longValue());

        assertEquals(0, a.unregisterMemory(m.address()));
        assertEquals(0, SegmentDescriptor.parse(kv.get("mooncake/ram/" + name)).buffers().size());

        a.close();
        assertFalse(kv.containsKey("mooncake/ram/" + name));
        assertFalse(kv.containsKey("mooncake/rpc_meta/" + name));
    }

    @Test
    void aNameMissingFromTheServerFailsOpenSegmentCleanly() {
        CoreEngine a = started();
        try (LogCapture log = LogCapture.start()) {
            assertEquals(-1, a.openSegment("127.0.0.1:1"));
            log.assertLogged(Level.WARN, "is not published");
        }
        assertEquals(0, a.openingsInFlight());
        // the engine still works: a real peer published later is found
        CoreEngine b = started();
        assertNotEquals(-1, a.openSegment(b.getLocalSegmentName()));
    }

    @Test
    void otherMetadataServersAreStillRefused() {
        CoreEngine e = TcpEngines.alone(TcpEngines.config());
        engines.add(e);
        try (LogCapture log = LogCapture.start()) {
            assertEquals(-1, e.initialize("127.0.0.1", "etcd://127.0.0.1:2379", "tcp", ""));
            assertTrue(e.lastError().contains("is not supported"), e.lastError());
            log.assertLogged(Level.ERROR, "is not supported");
        }
    }

    @Test
    void aForgedEntryNamingOurOwnDataPortIsOurOwnSegmentNotAPeer() {
        CoreEngine a = started();
        CoreEngine b = started();
        HostMemoryStorage m = alloc.allocate(LEN);
        assertEquals(0, a.registerMemory(m.address(), LEN, "cpu:0"));
        SegmentDescriptor own = a.localDescriptor();
        int ownData = own.tcpDataPort();
        // entries published by someone else under names of their choosing, each pointing at a's data port
        // on an address of this host; and one at b's (a real peer)
        for (String host : List.of("127.0.0.2", "localhost", "::1", "0.0.0.0")) {
            String name = "forged-" + host.replace(':', '_') + ":40000";
            publish(name, own, host, ownData);
            assertTrue(a.isOwnSegment(name), name + " names a's data port on " + host);
            assertEquals(0, a.openSegment(name));
            assertFalse(b.isOwnSegment(name), "but it is not b's");
        }
        publish("forged-peer:40000", own, "127.0.0.1", b.localDescriptor().tcpDataPort());
        assertFalse(a.isOwnSegment("forged-peer:40000"), "b's data port is a peer's");
    }

    /** Publishes {@code d}'s buffers under segment {@code name}, its RPC address {@code host}, data port {@code dataPort}. */
    private void publish(String name, SegmentDescriptor d, String host, int dataPort) {
        SegmentDescriptor forged = new SegmentDescriptor(name, d.protocol(), dataPort, d.tcpProtoVersion(),
                d.timestamp(), d.rdmaServerName(), d.buffers(), d.devices(), d.priorityMatrix(), d.extensions());
        kv.put("mooncake/ram/" + name, forged.toJson());
        kv.put("mooncake/rpc_meta/" + name, Json.write(Map.of("ip_or_host_name", host, "rpc_port", 40000)));
    }
}
