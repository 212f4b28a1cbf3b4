package io.mooncake4j.connector.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Hostile and slow clients against the bootstrap HTTP server: it answers or drops them and keeps serving. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BootstrapServerRobustnessTest {

    private MooncakeBootstrapServer server;
    private final List<Socket> sockets = new ArrayList<>();

    private MooncakeBootstrapServer start(MooncakeBootstrapServer.Limits limits) {
        server = new MooncakeBootstrapServer("127.0.0.1", 0, limits);
        server.start();
        return server;
    }

    @AfterEach
    void stop() throws IOException {
        for (Socket s : sockets) {
            s.close();
        }
        if (server != null) {
            server.close();
        }
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.connect(new InetSocketAddress("127.0.0.1", server.port()), 5000);
        s.setSoTimeout(10_000);
        return s;
    }

    /** Status code and body of the answer to {@code request} sent raw on a fresh connection. */
    private record Answer(int status, String head, String body) {
        Object json() {
            return Json.parse(body);
        }
    }

    private Answer raw(byte[] request) throws IOException {
        try (Socket s = connect()) {
            OutputStream out = s.getOutputStream();
            out.write(request);
            out.flush();
            s.shutdownOutput();
            return readAnswer(s.getInputStream());
        }
    }

    private static Answer readAnswer(InputStream in) throws IOException {
        String all = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        int split = all.indexOf("\r\n\r\n");
        assertTrue(split > 0, "no HTTP answer: '" + all + "'");
        String head = all.substring(0, split);
        int status = Integer.parseInt(head.substring(9, 12));
        return new Answer(status, head, all.substring(split + 4));
    }

    private static byte[] post(String body) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        String head = String.format(Locale.ROOT,
                "POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
                b.length);
        byte[] h = head.getBytes(StandardCharsets.ISO_8859_1);
        byte[] out = new byte[h.length + b.length];
        System.arraycopy(h, 0, out, 0, h.length);
        System.arraycopy(b, 0, out, h.length, b.length);
        return out;
    }

    private Answer query() throws IOException {
        return raw("GET /query HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
    }

    @Test
    void stalledClientsDoNotKeepQueryFromBeingAnswered() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults());
        for (int i = 0; i < 16; i++) {
            Socket s = connect();
            s.getOutputStream().write("GET /que".getBytes(StandardCharsets.ISO_8859_1)); // then nothing
            s.getOutputStream().flush();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.openConnections() < 16 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(16, server.openConnections(), "the stalled clients are connected");
        long t0 = System.nanoTime();
        Answer a = query();
        assertEquals(200, a.status);
        assertEquals(Map.of(), a.json());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5), "query answered while 16 clients stall");
    }

    @Test
    void tricklingClientIsClosedAtTheTotalRequestDeadline() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults().withConnections(400, 256));
        long t0 = System.nanoTime(); // before connect: the server's deadline runs from its accept
        Socket s = connect();
        OutputStream out = s.getOutputStream();
        InputStream in = s.getInputStream();
        byte[] head = "GET /query HTTP/1.1\r\nHost: localhost\r\nX-Pad: ".getBytes(StandardCharsets.ISO_8859_1);
        // one byte every 20 ms: each read succeeds well within any per-read timeout
        for (int i = 0; i < 500 && server.expiredConnections() == 0; i++) {
            try {
                out.write(head[Math.min(i, head.length - 1)]);
                out.flush();
            } catch (IOException e) {
                break; // reset by the server
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // pacing the trickle, not synchronising
        }
        boolean closedByServer = server.expiredConnections() > 0;
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(closedByServer, "the trickling connection was closed");
        try {
            assertEquals(-1, in.read(), "no answer to a request that never completed");
        } catch (IOException e) {
            // reset: closed as well
        }
        assertEquals(1, server.expiredConnections());
        assertTrue(ms >= 350 && ms < 10_000, "closed at the 400 ms deadline, took " + ms + " ms");
        assertEquals(200, query().status, "still serving");
    }

    @Test
    void connectionsBeyondTheCapCloseTheOldest() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults().withConnections(60_000, 4));
        for (int i = 0; i < 8; i++) {
            connect().getOutputStream().write('G');
        }
        Answer a = query();
        assertEquals(200, a.status);
        assertTrue(server.evictedConnections() >= 5, "evicted " + server.evictedConnections());
        assertTrue(server.openConnections() <= 4);
    }

    @Test
    void nonFiniteNumberInTheBodyGets422WithAJsonBody() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults());
        // JSON has no Infinity: a number outside the double range is a JSON decode error (pydantic's
        // json_invalid shape), answered like any other, never a dropped connection
        for (String body : new String[] {
            "{\"engine_id\":\"e\",\"dp_rank\":1e999,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"tcp://h:1\"}",
            "{\"engine_id\":\"e\",\"x\":-1e999,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}"}) {
            Answer a = raw(post(body));
            assertEquals(422, a.status, a.body);
            Map<?, ?> m = assertInstanceOf(Map.class, a.json());
            List<?> detail = assertInstanceOf(List.class, m.get("detail"));
            Map<?, ?> err = assertInstanceOf(Map.class, detail.get(0));
            assertEquals("json_invalid", err.get("type"), a.body);
            assertEquals(List.of("body", 0L), err.get("loc"), a.body);
            assertTrue(a.body.contains("range of a double"), a.body);
        }
        assertEquals(0, server.workers().engines().size());
    }

    @Test
    void malformedRequestsGetAJson4xxAnswer() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults());
        Object[][] cases = {
            {"NONSENSE\r\n\r\n", 400},
            {"GET /query HTTP/1.1\r\nno colon here\r\n\r\n", 400},
            {"POST /register HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400},
            {"POST /register HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400},
            {"POST /register HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411},
            {"POST /register HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413},
            {"GET /query HTTP/1.1\r\nX-Big: " + "a".repeat(20_000) + "\r\n\r\n", 431},
            {"DELETE /query HTTP/1.1\r\n\r\n", 405},
        };
        for (Object[] c : cases) {
            Answer a = raw(((String) c[0]).getBytes(StandardCharsets.ISO_8859_1));
            assertEquals(c[1], a.status, "answer to " + ((String) c[0]).substring(0, Math.min(20, ((String) c[0]).length())) + ": " + a.body);
            assertTrue(a.head.contains("Content-Type: application/json"), a.head);
            assertInstanceOf(Map.class, a.json());
        }
        Object[] bodies = {"{not json", "[1,2]", "{\"engine_id\":7,\"dp_rank\":[],\"tp_rank\":{},\"pp_rank\":null,\"addr\":1}",
            "\"\\ud800\"", "{\"engine_id\":\"e\",\"dp_rank\":1" + "0".repeat(400) + ",\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"a\"}"};
        for (Object b : bodies) {
            Answer a = raw(post((String) b));
            assertEquals(422, a.status, "answer to " + b + ": " + a.body);
            assertInstanceOf(Map.class, a.json());
        }
        assertEquals(200, query().status);
    }

    @Test
    void registrationTableIsBoundedWithAClear400() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults().withTable(2, 2, 3));
        String fmt = "{\"engine_id\":\"e%d\",\"dp_rank\":%d,\"tp_rank\":%d,\"pp_rank\":0,\"addr\":\"tcp://h:%d\"}";
        assertEquals(200, raw(post(String.format(Locale.ROOT, fmt, 0, 0, 0, 1))).status);
        assertEquals(200, raw(post(String.format(Locale.ROOT, fmt, 0, 0, 1, 2))).status);
        Answer perEngine = raw(post(String.format(Locale.ROOT, fmt, 0, 0, 2, 3)));
        assertEquals(400, perEngine.status);
        assertTrue(perEngine.body.contains("MOONCAKE4J_BOOTSTRAP_MAX_WORKERS_PER_ENGINE"), perEngine.body);
        assertEquals(200, raw(post(String.format(Locale.ROOT, fmt, 1, 1, 0, 4))).status);
        Answer total = raw(post(String.format(Locale.ROOT, fmt, 1, 1, 1, 5)));
        assertEquals(400, total.status);
        assertTrue(total.body.contains("MOONCAKE4J_BOOTSTRAP_MAX_WORKERS)"), total.body);
        Answer engines = raw(post(String.format(Locale.ROOT, fmt, 2, 2, 0, 6)));
        assertEquals(400, engines.status);
        assertTrue(engines.body.contains("MOONCAKE4J_BOOTSTRAP_MAX_ENGINES"), engines.body);
        assertEquals(2, server.workers().engines().size());
        Map<?, ?> q = assertInstanceOf(Map.class, query().json());
        assertEquals(2, q.size());
    }

    @Test
    void overlongEngineIdsAndAddressesAreRejectedSoTheTableIsBoundedInBytes() throws Exception {
        start(MooncakeBootstrapServer.Limits.defaults());
        String longAddr = "tcp://" + "h".repeat(2000) + ":1";
        Answer a = raw(post("{\"engine_id\":\"e\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,\"addr\":\"" + longAddr + "\"}"));
        assertEquals(422, a.status, a.body);
        assertTrue(a.body.contains("string_too_long"), a.body);
        Answer b = raw(post("{\"engine_id\":\"" + "e".repeat(1025) + "\",\"dp_rank\":0,\"tp_rank\":0,\"pp_rank\":0,"
                + "\"addr\":\"tcp://h:1\"}"));
        assertEquals(422, b.status, b.body);
        assertEquals(0, server.workers().engines().size());
    }
}
