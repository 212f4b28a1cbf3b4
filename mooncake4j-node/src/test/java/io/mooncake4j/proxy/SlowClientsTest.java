package io.mooncake4j.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.serve.ServeNode;
import io.mooncake4j.serve.ServeOptions;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Slow and sloppy clients at the front door of a decode node and of the proxy (P, D and the proxy in
 * this JVM, TCP transfer engine on loopback), with the nodes' default HTTP limits: slow request bodies
 * from one address do not lock the others out of a node's body-upload slots nor out of the proxy's
 * {@code --max-in-flight}; a header trickled byte by byte is cut off by the header deadline; framing
 * errors are answered or closed. The slow clients connect from 127.0.0.2 (loopback, another address),
 * the legitimate ones from 127.0.0.1. Bounded: tens of connections (by hand, 2,000 header tricklers
 * and 1,000 stalled bodies at once against one node were all cut within 11 s, docs/serving.md).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SlowClientsTest {

    private static final String SLOW_ADDRESS = "127.0.0.2";
    /** Generous: the default header deadline is 10 s; a busy machine may be slower still. */
    private static final Duration CLOSE_DEADLINE = Duration.ofSeconds(60);
    private static final int PROXY_MAX_IN_FLIGHT = 16;

    private static ServeNode prefill;
    private static ServeNode decode;
    private static DisaggProxy proxy;
    private static HttpClient http;
    private final List<Socket> sockets = new ArrayList<>();
    private final ScheduledExecutorService trickle = Executors.newSingleThreadScheduledExecutor();

    @BeforeAll
    static void nodes() throws IOException {
        prefill = node("kv_producer");
        decode = node("kv_consumer");
        ProxyConfig.Builder b = ProxyConfig.builder().port(0).probeInterval(Duration.ofMillis(50))
                .requestTimeout(Duration.ofSeconds(60)).maxInFlight(PROXY_MAX_IN_FLIGHT);
        b.addPrefill(prefill.url(), prefill.bootstrapPort());
        b.addDecode(decode.url());
        proxy = DisaggProxy.start(b.build());
        http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10))
                .build();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!proxy.isReady()) {
            assertTrue(System.nanoTime() < end, "proxy not ready");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
    }

    private static ServeNode node(String role) {
        String json = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}";
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(json,
                Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", "5"))
                .hostname("127.0.0.1").tp(0, 1).build();
        ModelPreset m = ModelPreset.TINY;
        int blocks = 128;
        return ServeNode.start(new ServeOptions(m, m.name(), "127.0.0.1", 0, c, blocks, "cpu", 0, "tcp",
                blocks * m.blockSize(), 16, 4096, 256, Duration.ofSeconds(1)));
    }

    @AfterAll
    static void close() {
        if (http != null) {
            http.close();
        }
        if (proxy != null) {
            proxy.close();
        }
        if (decode != null) {
            decode.close();
        }
        if (prefill != null) {
            prefill.close();
        }
    }

    @AfterEach
    void closeSockets() throws IOException {
        trickle.shutdownNow();
        for (Socket s : sockets) {
            s.close();
        }
    }

    // ------------------------------------------------------------------ slow bodies

    @Test
    void sixtyFourStalledBodiesDoNotLockLegitimateRequestsOutOfADecodeNodeNorCause502sThroughTheProxy()
            throws Exception {
        for (int i = 0; i < 64; i++) {
            stalledBody(decode.port());
        }
        HttpResponse<String> direct = complete(URI.create(decode.url()), "straight to D while 64 bodies stall");
        assertEquals(200, direct.statusCode(), direct.body());
        assertEquals("text_completion", Json.parseObject(direct.body()).get("object"));
        HttpResponse<String> proxied = complete(URI.create("http://127.0.0.1:" + proxy.port()),
                "through the proxy while 64 bodies stall at D");
        assertEquals(200, proxied.statusCode(), proxied.body());
        assertEquals("text_completion", Json.parseObject(proxied.body()).get("object"));
    }

    @Test
    void slowUploadsToTheProxyDoNotFillMaxInFlightForOthers() throws Exception {
        for (int i = 0; i < 3 * PROXY_MAX_IN_FLIGHT; i++) {
            stalledBody(proxy.port());
        }
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> r = complete(URI.create("http://127.0.0.1:" + proxy.port()),
                    "through the proxy while " + 3 * PROXY_MAX_IN_FLIGHT + " uploads stall, #" + i);
            assertEquals(200, r.statusCode(), r.body());
        }
    }

    @Test
    void aStalledBodyIsClosedOnceItFallsBelowTheMinimumRate() throws Exception {
        // the default rate (1 KiB/s in 10 s windows after a 10 s grace) or the body's overall deadline cuts a
        // body that stopped after 16 bytes
        List<Socket> slow = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            slow.add(stalledBody(decode.port()));
            slow.add(stalledBody(proxy.port()));
        }
        long end = System.nanoTime() + CLOSE_DEADLINE.toNanos();
        for (Socket s : slow) {
            awaitAnswerOrClose(s, end);
        }
        // 4 KiB declared: its overall deadline (the grace + 4 KiB at 64 KiB/s) may come before a rate window ends
        assertTrue(decode.httpFront().slowBodies() + decode.httpFront().lateBodies() >= 1, "D counted no cut body");
        assertTrue(proxy.httpFront().slowBodies() + proxy.httpFront().lateBodies() >= 1,
                "the proxy counted no cut body");
    }

    // ------------------------------------------------------------------ header deadline

    @Test
    void connectionsTricklingHeaderBytesAreCutOffByTheHeaderDeadline() throws Exception {
        List<Socket> slow = new ArrayList<>();
        for (int port : new int[] {decode.port(), proxy.port()}) {
            for (int i = 0; i < 8; i++) {
                Socket s = connect(port, SLOW_ADDRESS);
                OutputStream out = s.getOutputStream();
                out.write("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                // one byte every 200 ms: never idle, never complete
                trickle.scheduleAtFixedRate(() -> {
                    try {
                        out.write('a');
                        out.flush();
                    } catch (IOException closed) {
                        // the server cut it: what the test waits for, seen by the reader below
                    }
                }, 200, 200, TimeUnit.MILLISECONDS);
                slow.add(s);
            }
        }
        long end = System.nanoTime() + CLOSE_DEADLINE.toNanos();
        for (Socket s : slow) {
            awaitClose(s, end);
        }
        assertTrue(decode.httpFront().headerTimeouts() >= 8, "D cut " + decode.httpFront().headerTimeouts());
        assertTrue(proxy.httpFront().headerTimeouts() >= 8, "proxy cut " + proxy.httpFront().headerTimeouts());
        // the nodes still serve
        HttpResponse<String> r = complete(URI.create("http://127.0.0.1:" + proxy.port()), "after the tricklers");
        assertEquals(200, r.statusCode(), r.body());
    }

    // ------------------------------------------------------------------ bodies over the limit

    @Test
    void aDeclaredLengthOverTheLimitIsRefusedAtOnceWith413() throws Exception {
        for (int port : new int[] {decode.port(), proxy.port()}) {
            Socket s = connect(port, "127.0.0.1");
            s.getOutputStream().write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    + "application/json\r\nContent-Length: " + (1L << 30) + "\r\n\r\n{\"prompt\":")
                    .getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            String answer = awaitAnswerOrClose(s, System.nanoTime() + CLOSE_DEADLINE.toNanos());
            assertTrue(answer.startsWith("HTTP/1.1 413"), "port " + port + ": '" + answer + "'");
        }
    }

    @Test
    void aChunkDeclaredOverTheLimitIsRefusedAtOnceWith413() throws Exception {
        for (int port : new int[] {decode.port(), proxy.port()}) {
            Socket s = connect(port, "127.0.0.1");
            // a 4 GiB chunk, its first bytes, then nothing
            s.getOutputStream().write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    + "application/json\r\nTransfer-Encoding: chunked\r\n\r\n100000000\r\n{\"prompt\":")
                    .getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            String answer = awaitAnswerOrClose(s, System.nanoTime() + CLOSE_DEADLINE.toNanos());
            assertTrue(answer.startsWith("HTTP/1.1 413"), "port " + port + ": '" + answer + "'");
        }
    }

    // ------------------------------------------------------------------ framing

    @Test
    void aNegativeChunkSizeIsAnsweredOrClosed() throws Exception {
        for (int port : new int[] {decode.port(), proxy.port()}) {
            Socket s = connect(port, "127.0.0.1");
            // the chunk-size line and nothing after it: a server that takes "-1" as a length waits for more
            s.getOutputStream().write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    + "application/json\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            String answer = awaitAnswerOrClose(s, System.nanoTime() + CLOSE_DEADLINE.toNanos());
            assertTrue(answer.isEmpty() || answer.startsWith("HTTP/1.1 400"), answer);
        }
    }

    @Test
    void requestLinesEndedByABareLineFeedAreAnsweredOrClosed() throws Exception {
        for (int port : new int[] {decode.port(), proxy.port()}) {
            for (String request : new String[] {"GET /health HTTP/1.1\nHost: 127.0.0.1\n\n",
                    "POST /v1/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 2\n\n{}"}) {
                Socket s = connect(port, "127.0.0.1");
                s.getOutputStream().write(request.getBytes(StandardCharsets.US_ASCII));
                s.getOutputStream().flush();
                String answer = awaitAnswerOrClose(s, System.nanoTime() + CLOSE_DEADLINE.toNanos());
                assertTrue(answer.isEmpty() || answer.startsWith("HTTP/1.1 "), answer);
            }
        }
    }

    // ------------------------------------------------------------------ helpers

    private Socket connect(int port, String from) throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.bind(new InetSocketAddress(from, 0));
        s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        return s;
    }

    /** Complete headers announcing 4 KiB of JSON, then 16 bytes of it, then nothing. */
    private Socket stalledBody(int port) throws IOException {
        Socket s = connect(port, SLOW_ADDRESS);
        OutputStream out = s.getOutputStream();
        out.write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: 4096\r\n\r\n{\"prompt\":\"abcd").getBytes(StandardCharsets.US_ASCII));
        out.flush();
        return s;
    }

    private static HttpResponse<String> complete(URI base, String prompt) throws IOException, InterruptedException {
        String body = Json.write(Map.of("model", "tiny", "prompt", prompt, "max_tokens", 4));
        return http.send(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    /** Waits for the server to close the connection (EOF or reset); fails at the deadline ({@code nanoTime}). */
    private static void awaitClose(Socket s, long deadline) throws Exception {
        String answer = awaitAnswerOrClose(s, deadline);
        assertTrue(answer.isEmpty() || answer.startsWith("HTTP/1.1 4"), "not a close nor an error: " + answer);
    }

    /**
     * What the server sends until it closes the connection (empty when it just closes or resets it);
     * fails when it neither answers nor closes before the deadline ({@code nanoTime}).
     */
    private static String awaitAnswerOrClose(Socket s, long deadline) throws Exception {
        long waitMs = Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
        CompletableFuture<String> f = CompletableFuture.supplyAsync(() -> {
            StringBuilder got = new StringBuilder();
            try {
                s.setSoTimeout((int) waitMs);
                InputStream in = s.getInputStream();
                byte[] b = new byte[4096];
                int n;
                while ((n = in.read(b)) >= 0) {
                    got.append(new String(b, 0, n, StandardCharsets.ISO_8859_1));
                    if (got.indexOf("\r\n\r\n") >= 0) {
                        return got.toString(); // an answer's head: enough
                    }
                }
                return got.toString();
            } catch (SocketTimeoutException e) {
                return null;
            } catch (IOException reset) {
                return got.toString();
            }
        });
        String r;
        try {
            r = f.get(waitMs + 10_000, TimeUnit.MILLISECONDS);
        } catch (TimeoutException | ExecutionException e) {
            r = null;
        }
        assertTrue(r != null, "no answer and no close within " + CLOSE_DEADLINE);
        return r;
    }
}
