package io.mooncake4j.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A route newly registered in a {@link Routes} table is protected without calling any helper: its
 * body is refused with 413 over the table's limit (declared, or as a chunk), a stalled body closes the
 * connection, and in both cases the route is never called; a route registered without a body cannot
 * read one. Clients are raw sockets on loopback.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RoutesTest {

    private static final int LIMIT = 1024;

    private HttpFront front;
    private Routes routes;
    private final AtomicInteger called = new AtomicInteger();
    private final List<Throwable> noBodyReads = new CopyOnWriteArrayList<>();
    private final List<Socket> sockets = new ArrayList<>();

    @AfterEach
    void stop() throws IOException {
        for (Socket s : sockets) {
            s.close();
        }
        if (front != null) {
            front.close();
        }
    }

    /** A table with one new body route (it echoes the body's length) and one route without a body. */
    private void start(HttpLimits limits) throws IOException {
        routes = Routes.builder(limits, LIMIT,
                (ex, r) -> ("{\"refused\":" + r.status() + ",\"why\":\"" + r.reason() + "\"}")
                        .getBytes(StandardCharsets.UTF_8),
                (ex, allowed) -> {
                    byte[] b = ("allowed=" + allowed).getBytes(StandardCharsets.UTF_8);
                    ex.sendResponseHeaders(allowed.isEmpty() ? 404 : 405, b.length);
                    ex.responseBody().write(b);
                })
                .withBody("POST", "/new", (ex, body) -> {
                    called.incrementAndGet();
                    byte[] b = ("got " + body.length).getBytes(StandardCharsets.UTF_8);
                    ex.sendResponseHeaders(200, b.length);
                    ex.responseBody().write(b);
                })
                .withoutBody("GET", "/plain", ex -> {
                    try {
                        ex.requestBody();
                    } catch (IllegalStateException e) {
                        noBodyReads.add(e);
                    }
                    ex.sendResponseHeaders(204, -1);
                })
                .build();
        front = HttpFront.start("routes-test-", "127.0.0.1", 0, 128, limits, routes);
    }

    private Socket open() throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.connect(new InetSocketAddress("127.0.0.1", front.port()), 30_000);
        return s;
    }

    private static void send(Socket s, String head, byte[] body) throws IOException {
        OutputStream out = s.getOutputStream();
        out.write(head.getBytes(StandardCharsets.ISO_8859_1));
        out.write(body);
        out.flush();
    }

    private static String post(long length) {
        return "POST /new HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: " + length + "\r\n\r\n";
    }


    @Test
    void aBodyWithinTheLimitReachesTheNewRouteWholeAndGivesItsSlotBack() throws Exception {
        start(HttpLimits.defaults());
        Socket s = open();
        send(s, post(LIMIT), new byte[LIMIT]);
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r);
        assertTrue(r.startsWith("HTTP/1.1 200"), r);
        assertTrue(r.endsWith("got " + LIMIT), r);
        assertEquals(1, called.get());
        RawHttp.await(() -> routes.bodySlots().inUse() == 0, "body slots held: " + routes.bodySlots().inUse());
    }

    @Test
    void aNewRouteAnswers413ForADeclaredOversizeBodyWithoutBeingCalled() throws Exception {
        start(HttpLimits.defaults());
        Socket s = open();
        send(s, post(LIMIT + 1), new byte[LIMIT + 1]);
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r);
        assertTrue(r.startsWith("HTTP/1.1 413"), r);
        assertTrue(r.endsWith("{\"refused\":413,\"why\":\"TOO_LARGE\"}"), r);
        assertEquals(0, called.get());
    }

    @Test
    void aNewRouteAnswers413ForAnOversizeChunkWithoutBeingCalled() throws Exception {
        start(HttpLimits.defaults());
        Socket s = open();
        String head = "POST /new HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                + Integer.toHexString(LIMIT * 4) + "\r\n";
        send(s, head, new byte[10]); // the chunk is declared over the limit: refused before it arrives
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r);
        assertTrue(r.startsWith("HTTP/1.1 413"), r);
        assertTrue(r.toLowerCase(java.util.Locale.ROOT).contains("connection: close"), r);
        assertEquals(0, called.get());
    }

    @Test
    void aStalledBodyOnANewRouteIsCutWithoutTheRouteBeingCalled() throws Exception {
        // 1 KiB/s in every 1 s window after a 1 s grace, no overall deadline: the window check cuts it
        start(HttpLimits.defaults().withMinBodyRate(1024, Duration.ofSeconds(1)).withBodyDeadlineRate(0));
        Socket s = open();
        send(s, post(LIMIT), new byte[10]); // then nothing more
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r, "the stalled body was not cut");
        assertTrue(r.isEmpty() || !r.startsWith("HTTP/1.1 200"), r);
        RawHttp.await(() -> front.slowBodies() == 1, "slow bodies counted: " + front.slowBodies());
        assertEquals(0, called.get());
        RawHttp.await(() -> routes.bodySlots().inUse() == 0, "body slots held: " + routes.bodySlots().inUse());
    }

    @Test
    void aRouteWithoutABodyCannotReadOneAndUnmatchedRequestsGetTheNodesAnswer() throws Exception {
        start(HttpLimits.defaults());
        Socket s = open();
        send(s, "GET /plain HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", new byte[0]);
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r);
        assertTrue(r.startsWith("HTTP/1.1 204"), r);
        assertEquals(1, noBodyReads.size());
        assertTrue(noBodyReads.getFirst().getMessage().contains("GET /plain"), noBodyReads.getFirst().getMessage());

        Socket wrongMethod = open();
        send(wrongMethod, "GET /new HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", new byte[0]);
        String w = RawHttp.answerOrClose(wrongMethod);
        assertNotNull(w);
        assertTrue(w.startsWith("HTTP/1.1 405") && w.endsWith("allowed=[POST]"), w);

        Socket unknown = open();
        send(unknown, "GET /nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", new byte[0]);
        String u = RawHttp.answerOrClose(unknown);
        assertNotNull(u);
        assertTrue(u.startsWith("HTTP/1.1 404") && u.endsWith("allowed=[]"), u);
        assertEquals(0, called.get());
    }

    @Test
    void aRouteIsRegisteredOnce() {
        Routes.Builder b = Routes.builder(HttpLimits.defaults(), LIMIT, (ex, r) -> new byte[0], (ex, a) -> { })
                .withoutBody("GET", "/x", ex -> { });
        assertThrows(IllegalArgumentException.class, () -> b.withBody("GET", "/x", (ex, body) -> { }));
        assertThrows(IllegalArgumentException.class, () -> b.withBody("POST", "/y", -1, null, (ex, body) -> { }));
    }
}
