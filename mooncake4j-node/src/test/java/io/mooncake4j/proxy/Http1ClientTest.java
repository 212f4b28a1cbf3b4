package io.mooncake4j.proxy;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link Http1Client} against a scripted server on a local {@link ServerSocket} (port 0). */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class Http1ClientTest {

    /** Answers the requests of one connection; {@code conn} counts connections from 0. */
    private interface Script {
        void serve(BufferedInputStream in, OutputStream out, int conn) throws IOException;
    }

    private final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
    }

    /** A server running {@code script} on each accepted connection (a virtual thread each). */
    private final class Server implements AutoCloseable {
        final ServerSocket socket;
        final AtomicInteger accepted = new AtomicInteger();
        final List<Socket> conns = new CopyOnWriteArrayList<>();
        final List<Throwable> failures = new CopyOnWriteArrayList<>();
        final Thread acceptor;

        Server(Script script) throws IOException {
            socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            acceptor = Thread.ofVirtual().start(() -> {
                while (!socket.isClosed()) {
                    Socket s;
                    try {
                        s = socket.accept();
                    } catch (IOException closed) {
                        return;
                    }
                    int n = accepted.getAndIncrement();
                    conns.add(s);
                    Thread.ofVirtual().start(() -> {
                        try (s) {
                            script.serve(new BufferedInputStream(s.getInputStream()), s.getOutputStream(), n);
                        } catch (IOException expected) {
                            // the client closed its end; the tests check what the client saw
                        } catch (RuntimeException | Error e) {
                            failures.add(e);
                        }
                    });
                }
            });
            open.add(this);
        }

        URI uri(String path) {
            return URI.create("http://127.0.0.1:" + socket.getLocalPort() + path);
        }

        String hostPort() {
            return "127.0.0.1:" + socket.getLocalPort();
        }

        @Override
        public void close() throws Exception {
            socket.close();
            for (Socket s : conns) {
                s.close();
            }
            acceptor.join();
            assertTrue(failures.isEmpty(), "server script failed: " + failures);
        }
    }

    private Http1Client client(Http1Client.Limits limits) {
        Http1Client c = new Http1Client(limits, Thread.ofVirtual().name("test-http-", 0).factory());
        open.add(c);
        return c;
    }

    private Http1Client client() {
        return client(Http1Client.Limits.defaults(Duration.ofSeconds(5)));
    }

    /** Reads one request (head and a Content-Length body); returns its request line, or null at end of stream. */
    private static String readRequest(BufferedInputStream in) throws IOException {
        String first = null;
        int length = 0;
        while (true) {
            String line = line(in);
            if (line == null) {
                return null;
            }
            if (first == null) {
                first = line;
            } else if (line.isEmpty()) {
                break;
            } else if (line.toLowerCase().startsWith("content-length:")) {
                length = Integer.parseInt(line.substring(15).trim());
            }
        }
        in.readNBytes(length);
        return first;
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int ch;
        while ((ch = in.read()) >= 0 && ch != '\n') {
            b.write(ch);
        }
        if (ch < 0 && b.size() == 0) {
            return null;
        }
        String s = b.toString(StandardCharsets.ISO_8859_1);
        return s.endsWith("\r") ? s.substring(0, s.length() - 1) : s;
    }

    private static void write(OutputStream out, String s) throws IOException {
        out.write(s.getBytes(StandardCharsets.ISO_8859_1));
        out.flush();
    }

    private static String get(Http1Client c, URI uri) throws IOException {
        try (Http1Client.Response r = c.send(Http1Client.Request.get(uri, Duration.ofSeconds(5)))) {
            return r.statusCode() + " " + r.bodyString(1 << 20);
        }
    }

    @Test
    void contentLengthAnswersReuseOneConnection() throws Exception {
        List<String> seen = new CopyOnWriteArrayList<>();
        Server s = new Server((in, out, conn) -> {
            String req;
            while ((req = readRequest(in)) != null) {
                seen.add(conn + " " + req);
                write(out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
            }
        });
        Http1Client c = client();
        for (int i = 0; i < 3; i++) {
            assertEquals("200 hello", get(c, s.uri("/a?x=" + i)));
        }
        try (Http1Client.Response r = c.send(Http1Client.Request.post(s.uri("/p"), Map.of("X-Test", "1"),
                "{}".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(5)))) {
            assertEquals("text/plain", r.header("content-type").orElseThrow());
            assertEquals("hello", r.bodyString(100));
        }
        assertEquals(1, s.accepted.get(), "every request on one kept-alive connection");
        assertEquals(List.of("0 GET /a?x=0 HTTP/1.1", "0 GET /a?x=1 HTTP/1.1", "0 GET /a?x=2 HTTP/1.1",
                "0 POST /p HTTP/1.1"), seen);
        assertEquals(1, c.idleConnections(s.hostPort()));
    }

    @Test
    void chunkedBodyWithExtensionsAndTrailersIsReadAndTheConnectionReused() throws Exception {
        Server s = new Server((in, out, conn) -> {
            while (readRequest(in) != null) {
                write(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n");
            }
        });
        Http1Client c = client();
        assertEquals("200 hello 0123456789", get(c, s.uri("/")));
        assertEquals("200 hello 0123456789", get(c, s.uri("/")));
        assertEquals(1, s.accepted.get());
    }

    @Test
    void streamedChunksArriveAsTheyAreSent() throws Exception {
        CountDownLatch firstRead = new CountDownLatch(1);
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "6\r\ndata:1\r\n");
            try {
                assertTrue(firstRead.await(10, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                throw new IOException(e);
            }
            write(out, "6\r\ndata:2\r\n0\r\n\r\n");
        });
        Http1Client c = client();
        try (Http1Client.Response r = c.send(Http1Client.Request.get(s.uri("/s"), Duration.ofSeconds(5)))) {
            byte[] b = new byte[64];
            int n = r.body().read(b);
            assertEquals("data:1", new String(b, 0, n, StandardCharsets.US_ASCII), "the first chunk before the rest is sent");
            firstRead.countDown();
            assertEquals("data:2", new String(r.body().readAllBytes(), StandardCharsets.US_ASCII));
        }
    }

    @Test
    void malformedAnswersAreClearErrorsAndTheConnectionIsNotReused() throws Exception {
        String[] answers = {
            "HTP/1.1 200 OK\r\n\r\n",
            "HTTP/1.1 2x0 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        };
        String[] expect = {"malformed status line", "malformed status code", "malformed header line",
            "conflicting Content-Length", "bad Content-Length", "unsupported Transfer-Encoding", "bad chunk size",
            "not followed by CRLF", "bad chunk size"};
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, answers[conn]);
            line(in); // hold the connection until the client closes it
        });
        Http1Client c = client();
        for (int i = 0; i < answers.length; i++) {
            IOException e = assertThrows(IOException.class, () -> get(c, s.uri("/")), answers[i]);
            assertTrue(e.getMessage().contains(expect[i]), i + ": " + e.getMessage());
            assertEquals(0, c.idleConnections(s.hostPort()));
        }
        assertEquals(answers.length, s.accepted.get(), "a fresh connection after each failure");
    }

    @Test
    void headerSizeLineLengthAndFieldCountAreBounded() throws Exception {
        String many = "X-F: v\r\n".repeat(20);
        String[] answers = {
            "HTTP/1.1 200 OK\r\nX-Long: " + "a".repeat(300) + "\r\n\r\n",
            "HTTP/1.1 200 OK\r\n" + ("X-Mid: " + "b".repeat(150) + "\r\n").repeat(10) + "\r\n",
            "HTTP/1.1 200 OK\r\n" + many + "\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;" + "e".repeat(300) + "\r\nhello\r\n0\r\n\r\n",
        };
        String[] expect = {"exceeds 256 bytes", "header block", "more than 10 header fields", "exceeds 256 bytes"};
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, answers[conn]);
            line(in);
        });
        Http1Client c = client(new Http1Client.Limits(Duration.ofSeconds(5), Duration.ofSeconds(2), 4, 256, 1024, 10));
        for (int i = 0; i < answers.length; i++) {
            IOException e = assertThrows(IOException.class, () -> get(c, s.uri("/")));
            assertTrue(e.getMessage().contains(expect[i]), i + ": " + e.getMessage());
        }
    }

    @Test
    void earlyCloseInsideTheBodyOrTheHeadersIsAnError() throws Exception {
        String[] answers = {
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
            "HTTP/1.1 200 OK\r\nContent-Le",
        };
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, answers[conn]);
        });
        Http1Client c = client();
        for (int i = 0; i < answers.length; i++) {
            assertThrows(EOFException.class, () -> get(c, s.uri("/")), answers[i]);
        }
    }

    @Test
    void bodyUntilCloseAndHttp10AndConnectionCloseAreNotPooled() throws Exception {
        String[] answers = {
            "HTTP/1.1 200 OK\r\n\r\nto the end",
            "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        };
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, answers[conn]);
            if (conn == 0) {
                out.close();
            } else {
                line(in);
            }
        });
        Http1Client c = client();
        assertEquals("200 to the end", get(c, s.uri("/")));
        assertEquals("200 ok", get(c, s.uri("/")));
        assertEquals("200 ok", get(c, s.uri("/")));
        assertEquals(0, c.idleConnections(s.hostPort()));
        assertEquals("204 ", get(c, s.uri("/")), "a 1xx is skipped; a 204 has no body");
        assertEquals(1, c.idleConnections(s.hostPort()));
    }

    @Test
    void aPooledConnectionTheServerClosedIsRetriedOnceOnANewOne() throws Exception {
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n" + conn);
            // then close without saying so: the client pooled the connection
        });
        Http1Client c = client();
        assertEquals("200 0", get(c, s.uri("/")));
        assertEquals(1, c.idleConnections(s.hostPort()));
        assertEquals("200 1", get(c, s.uri("/")));
        assertEquals(2, s.accepted.get());
    }

    @Test
    void aPostOnAPooledConnectionTheServerClosedIsNotSentTwice() throws Exception {
        List<String> seen = new CopyOnWriteArrayList<>();
        Server s = new Server((in, out, conn) -> {
            String req = readRequest(in);
            seen.add(req);
            if (conn == 0) {
                write(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                seen.add(String.valueOf(readRequest(in))); // the POST arrives; the connection closes unanswered
            }
        });
        Http1Client c = client();
        assertEquals("200 ok", get(c, s.uri("/")));
        IOException e = assertThrows(IOException.class, () -> c.send(Http1Client.Request.post(s.uri("/p"), Map.of(),
                new byte[3], Duration.ofSeconds(5))));
        assertTrue(e.getMessage().contains("not resent"), e.getMessage());
        assertEquals(List.of("GET / HTTP/1.1", "POST /p HTTP/1.1"), seen);
        assertEquals(1, s.accepted.get(), "no second connection for the POST");
    }

    @Test
    void aFreshConnectionClosedBeforeAnAnswerIsNotRetried() throws Exception {
        Server s = new Server((in, out, conn) -> readRequest(in));
        Http1Client c = client();
        IOException e = assertThrows(IOException.class, () -> get(c, s.uri("/")));
        assertTrue(e.getMessage().contains("closed by the upstream before an answer"), e.getMessage());
        assertEquals(1, s.accepted.get());
    }

    @Test
    void idleConnectionsKeptPerUpstreamAreBounded() throws Exception {
        CountDownLatch all = new CountDownLatch(4);
        Server s = new Server((in, out, conn) -> {
            String req;
            while ((req = readRequest(in)) != null) {
                all.countDown();
                try {
                    assertTrue(all.await(10, TimeUnit.SECONDS));
                } catch (InterruptedException e) {
                    throw new IOException(e);
                }
                write(out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        });
        Http1Client c = client(new Http1Client.Limits(Duration.ofSeconds(5), Duration.ofSeconds(30), 2, 8192, 65536, 100));
        List<CompletableFuture<Http1Client.Response>> fs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            fs.add(c.sendAsync(Http1Client.Request.get(s.uri("/"), Duration.ofSeconds(5))));
        }
        for (CompletableFuture<Http1Client.Response> f : fs) {
            try (Http1Client.Response r = f.get(10, TimeUnit.SECONDS)) {
                assertEquals("ok", r.bodyString(10));
            }
        }
        assertEquals(4, s.accepted.get(), "four requests at once: four connections");
        assertEquals(2, c.idleConnections(s.hostPort()), "only two kept");
    }

    @Test
    void aBodyClosedBeforeItsEndClosesTheConnection() throws Exception {
        CountDownLatch clientClosed = new CountDownLatch(1);
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            assertEquals(null, line(in), "the client closed the connection");
            clientClosed.countDown();
        });
        Http1Client c = client();
        Http1Client.Response r = c.send(Http1Client.Request.get(s.uri("/"), Duration.ofSeconds(5)));
        assertEquals('a', r.body().read());
        r.close();
        assertTrue(clientClosed.await(10, TimeUnit.SECONDS));
        assertEquals(0, c.idleConnections(s.hostPort()));
    }

    @Test
    void noAnswerWithinTheTimeoutIsAnHttpTimeoutException() throws Exception {
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            line(in); // never answers
        });
        Http1Client c = client();
        long t0 = System.nanoTime();
        assertThrows(HttpTimeoutException.class,
                () -> c.send(Http1Client.Request.get(s.uri("/"), Duration.ofMillis(200))));
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
    }

    @Test
    void aStalledBodyFailsItsReadWithAnHttpTimeoutException() throws Exception {
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            write(out, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            line(in);
        });
        Http1Client c = client();
        try (Http1Client.Response r = c.send(Http1Client.Request.get(s.uri("/"), Duration.ofMillis(300)))) {
            assertThrows(HttpTimeoutException.class, () -> r.body().readAllBytes());
        }
    }

    @Test
    void cancellingAnAsyncCallClosesItsConnection() throws Exception {
        CountDownLatch requested = new CountDownLatch(1);
        CountDownLatch closedByClient = new CountDownLatch(1);
        Server s = new Server((in, out, conn) -> {
            readRequest(in);
            requested.countDown();
            if (line(in) == null) {
                closedByClient.countDown();
            }
        });
        Http1Client c = client();
        CompletableFuture<Http1Client.Response> f = c.sendAsync(Http1Client.Request.post(s.uri("/"), Map.of(),
                new byte[10], Duration.ofSeconds(20)));
        assertTrue(requested.await(10, TimeUnit.SECONDS));
        assertTrue(f.cancel(true));
        assertTrue(closedByClient.await(10, TimeUnit.SECONDS), "the server saw the connection close");
        assertFalse(c.idleConnections(s.hostPort()) > 0);
    }

    @Test
    void refusedConnectionAndBadArgumentsAreClear() throws Exception {
        int port;
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = ss.getLocalPort();
        }
        Http1Client c = client();
        assertThrows(java.net.ConnectException.class,
                () -> get(c, URI.create("http://127.0.0.1:" + port + "/")));
        assertThrows(IllegalArgumentException.class,
                () -> Http1Client.Request.get(URI.create("https://127.0.0.1/"), Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> c.send(Http1Client.Request.post(
                URI.create("http://127.0.0.1:" + port + "/"), Map.of("X-Bad", "a\r\nInjected: 1"), null,
                Duration.ofSeconds(1))));
        c.close();
        assertThrows(IOException.class, () -> get(c, URI.create("http://127.0.0.1:" + port + "/")));
    }
}
