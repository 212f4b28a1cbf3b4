package io.mooncake4j.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Body admission at the front door: a body is judged on a recent window, held to an overall deadline
 * proportional to its declared length, and a full house evicts the slowest body rather than refusing
 * the newest; shares are per network prefix. A tiny route table (a body route that answers 200 with the
 * body's length; the table reads the body under a body slot) on {@link HttpFront}; clients are raw sockets, the slow ones from 127.0.0.2 (the same /24 as the
 * legitimate 127.0.0.1).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HttpFrontAdmissionTest {

    private HttpFront front;
    private FairSlots bodies;
    private final List<Long> arrivals = new java.util.concurrent.CopyOnWriteArrayList<>();
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

    private void start(HttpLimits limits) throws IOException {
        Routes.BodyRoute echoLength = (ex, body) -> {
            byte[] b = Integer.toString(body.length).getBytes(StandardCharsets.US_ASCII);
            ex.sendResponseHeaders(200, b.length);
            ex.responseBody().write(b);
        };
        Routes.Gate arrived = ex -> arrivals.add(System.nanoTime());
        Routes routes = Routes.builder(limits, 64 << 20, (ex, r) -> new byte[0],
                        (ex, allowed) -> ex.sendResponseHeaders(404, -1))
                .slotWait(Duration.ofSeconds(30))
                .withBody("POST", "/x", 64 << 20, arrived, echoLength)
                .withBody("GET", "/x", 64 << 20, arrived, echoLength)
                .build();
        bodies = routes.bodySlots();
        front = HttpFront.start("admission-test-", "127.0.0.1", 0, 128, limits, routes);
    }

    private Socket open(String from) throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.bind(new InetSocketAddress(from, 0));
        s.connect(new InetSocketAddress("127.0.0.1", front.port()), 30_000);
        return s;
    }

    private static void send(Socket s, String head, int bodyBytes) throws IOException {
        OutputStream out = s.getOutputStream();
        out.write(head.getBytes(StandardCharsets.ISO_8859_1));
        out.write(new byte[bodyBytes]);
        out.flush();
    }

    private static String post(long length) {
        return "POST /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: " + length + "\r\n\r\n";
    }


    @Test
    void aBodyThatStopsAfterAFastStartIsCutOnTheRecentWindow() throws Exception {
        // 1 KiB/s in every 1 s window after a 1 s grace; the lifetime average of 256 KiB would last minutes
        start(HttpLimits.defaults().withMinBodyRate(1024, Duration.ofSeconds(1)).withBodyDeadlineRate(0));
        Socket s = open("127.0.0.2");
        send(s, post(16L << 20), 256 << 10);
        String r = RawHttp.answerOrClose(s);
        assertNotNull(r, "the stalled body was not cut");
        assertTrue(r.isEmpty() || !r.startsWith("HTTP/1.1 200"), r);
        RawHttp.await(() -> front.slowBodies() == 1, "slow bodies counted: " + front.slowBodies());
    }

    @Test
    void aBodyKeepingAboveTheMinimumRateIsStillCutAtItsOverallDeadline() throws Exception {
        // 4 bytes/s is enough for the window check (1 B/s) but not for 2 KiB within 1 s + 2 KiB at 2 KiB/s
        start(HttpLimits.defaults().withMinBodyRate(1, Duration.ofSeconds(1)).withBodyDeadlineRate(2048));
        Socket s = open("127.0.0.2");
        send(s, post(2048), 1);
        java.util.concurrent.ScheduledExecutorService drip = java.util.concurrent.Executors
                .newSingleThreadScheduledExecutor();
        try {
            drip.scheduleAtFixedRate(() -> {
                try {
                    s.getOutputStream().write(0);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e); // closed: the drip ends
                }
            }, 250, 250, TimeUnit.MILLISECONDS);
            String r = RawHttp.answerOrClose(s);
            assertNotNull(r, "the dripping body was not cut");
            assertTrue(r.isEmpty() || !r.startsWith("HTTP/1.1 200"), r);
        } finally {
            drip.shutdownNow();
        }
        RawHttp.await(() -> front.lateBodies() == 1, "late bodies counted: " + front.lateBodies());
        assertEquals(0, front.slowBodies());
    }

    @Test
    void aFullHouseEvictsTheSlowestBodyOfTheBusiestNetworkInsteadOfRefusingTheNewcomer() throws Exception {
        // 4 body slots, all 4 for one /24: stalled bodies from 127.0.0.2 hold them all
        start(HttpLimits.defaults().withBodySlots(4, 4).withMinBodyRate(0, Duration.ZERO).withBodyDeadlineRate(0));
        List<Socket> stalled = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Socket s = open("127.0.0.2");
            send(s, post(1 << 20), 16);
            stalled.add(s);
        }
        RawHttp.await(() -> bodies.inUse() == 4, "4 bodies held: " + bodies.inUse());
        Socket legit = open("127.0.0.1");
        send(legit, post(1000), 1000);
        String r = RawHttp.answerOrClose(legit);
        assertNotNull(r, "the legitimate request got no answer");
        assertTrue(r.startsWith("HTTP/1.1 200"), r);
        assertTrue(r.endsWith("1000"), r);
        assertEquals(1, bodies.evictions());
    }

    @Test
    void sharesArePerNetworkPrefix() throws Exception {
        HttpLimits l = HttpLimits.defaults();
        FairSlots slots = new FairSlots(8, 2, l::network);
        InetAddress a = InetAddress.getByName("10.1.2.3");
        InetAddress b = InetAddress.getByName("10.1.2.200");
        InetAddress other = InetAddress.getByName("10.1.3.3");
        assertNotNull(slots.tryAcquire(a));
        assertNotNull(slots.tryAcquire(b));
        assertNull(slots.tryAcquire(a), "10.1.2.0/24 holds its share");
        assertNotNull(slots.tryAcquire(other), "another /24 has its own");
        InetAddress v6a = InetAddress.getByName("2001:db8:1:2::1");
        InetAddress v6b = InetAddress.getByName("2001:db8:1:2:ffff::9");
        assertNotNull(slots.tryAcquire(v6a));
        assertNotNull(slots.tryAcquire(v6b));
        assertNull(slots.tryAcquire(v6a), "one /64 holds its share");
        assertEquals(InetAddress.getByName("10.1.0.0"), HttpLimits.prefixOf(a, 16, 64));
        assertEquals(a, HttpLimits.prefixOf(a, 32, 128), "/32: per address");
        FairSlots perAddress = new FairSlots(8, 2, l.withPrefixes(32, 128)::network);
        perAddress.tryAcquire(a);
        perAddress.tryAcquire(a);
        assertNotNull(perAddress.tryAcquire(b), "per address: b has its own");
    }

    /** One answer of a kept-alive connection: its head and its {@code Content-Length} bytes. */
    private static String readOne(Socket s) throws IOException {
        s.setSoTimeout((int) TimeUnit.NANOSECONDS.toMillis(RawHttp.WAIT_NANOS));
        InputStream in = s.getInputStream();
        StringBuilder got = new StringBuilder();
        while (got.indexOf("\r\n\r\n") < 0) {
            int b = in.read();
            assertTrue(b >= 0, "closed before an answer: " + got);
            got.append((char) b);
        }
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?i)content-length: *(\\d+)").matcher(got);
        int len = m.find() ? Integer.parseInt(m.group(1)) : 0;
        got.append(new String(in.readNBytes(len), StandardCharsets.ISO_8859_1));
        return got.toString();
    }

    @Test
    void beyondTheConnectionCapANewConnectionIsServedOnlyOnceAnotherCloses() throws Exception {
        start(HttpLimits.defaults().withMaxConnections(2));
        String get = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
        Socket a = open("127.0.0.1");
        Socket b = open("127.0.0.1");
        for (Socket s : new Socket[] {a, b}) {
            send(s, get, 0);
            assertTrue(readOne(s).startsWith("HTTP/1.1 200"), "a kept-alive connection under the cap");
        }
        assertEquals(2, front.openConnections());
        Socket c = open("127.0.0.1");
        send(c, "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 0);
        long closedAt = System.nanoTime();
        a.close();
        String r = RawHttp.answerOrClose(c);
        assertNotNull(r, "the third connection was never served");
        assertTrue(r.startsWith("HTTP/1.1 200"), r);
        assertEquals(3, arrivals.size());
        assertTrue(arrivals.get(2) > closedAt, "the third request was read only after a connection closed");
    }
}
