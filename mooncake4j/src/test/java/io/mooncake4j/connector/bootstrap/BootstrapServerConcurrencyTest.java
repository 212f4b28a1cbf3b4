package io.mooncake4j.connector.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Many clients at once, a new connection per request, mixed {@code /query} and {@code /register}:
 * every request gets an HTTP answer and the table equals what was answered 200.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BootstrapServerConcurrencyTest {

    private static final int CLIENTS = 32;
    private static final int REQUESTS = 50;

    private MooncakeBootstrapServer server;

    @AfterEach
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    /** One request on a fresh connection; the status, or -1 with the reason when no answer came. */
    private record Outcome(int status, String body, String failure) {
    }

    private Outcome exchange(byte[] request) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", server.port()), 30_000);
            s.setSoTimeout(60_000);
            OutputStream out = s.getOutputStream();
            out.write(request);
            out.flush();
            InputStream in = s.getInputStream();
            String all = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            int split = all.indexOf("\r\n\r\n");
            if (!all.startsWith("HTTP/1.1 ") || split < 0) {
                return new Outcome(-1, null, "no answer: '" + all + "'");
            }
            return new Outcome(Integer.parseInt(all.substring(9, 12)), all.substring(split + 4), null);
        } catch (IOException e) {
            return new Outcome(-1, null, e.toString());
        }
    }

    private static byte[] register(String engine, int dp, int tp, int pp, String addr) {
        byte[] b = String.format(Locale.ROOT,
                "{\"engine_id\":\"%s\",\"dp_rank\":%d,\"tp_rank\":%d,\"pp_rank\":%d,\"addr\":\"%s\"}",
                engine, dp, tp, pp, addr).getBytes(StandardCharsets.UTF_8);
        byte[] h = String.format(Locale.ROOT,
                "POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
                b.length).getBytes(StandardCharsets.ISO_8859_1);
        byte[] out = new byte[h.length + b.length];
        System.arraycopy(h, 0, out, 0, h.length);
        System.arraycopy(b, 0, out, h.length, b.length);
        return out;
    }

    @Test
    void everyRequestIsAnsweredAndTheTableEqualsTheAcceptedRegistrations() throws Exception {
        hammer(MooncakeBootstrapServer.Limits.defaults(), false);
    }

    /**
     * Fewer connections allowed than clients, with churn (connections closed before, inside and
     * right after a request): requests beyond the cap are answered 503, never closed unanswered, and
     * a registration is stored exactly when it was answered 200.
     */
    @Test
    void atTheConnectionCapEveryRequestStillGetsAStatusAndTheTableStaysExact() throws Exception {
        hammer(MooncakeBootstrapServer.Limits.defaults().withConnections(30_000, 8), true);
        assertTrue(server.evictedConnections() + server.refusedConnections() > 0,
                "the cap was reached: evicted " + server.evictedConnections() + ", refused "
                        + server.refusedConnections());
    }

    /** A slow client from one address keeps its connection while another address opens more than the cap. */
    @Test
    void oneAddressOpeningManyConnectionsEvictsItsOwnNotAnotherAddresss() throws Exception {
        server = new MooncakeBootstrapServer("127.0.0.1", 0,
                MooncakeBootstrapServer.Limits.defaults().withConnections(30_000, 8));
        server.start();
        byte[] req = register("e", 0, 0, 0, "tcp://10.0.0.1:1");
        int headEnd = new String(req, StandardCharsets.ISO_8859_1).indexOf("\r\n\r\n") + 4;
        List<Socket> crowd = new ArrayList<>();
        try (Socket legit = new Socket()) {
            legit.connect(new InetSocketAddress("127.0.0.1", server.port()), 30_000);
            legit.setSoTimeout(30_000);
            legit.getOutputStream().write(req, 0, headEnd); // the body follows later
            legit.getOutputStream().flush();
            awaitOpen(1);
            for (int i = 0; i < 12; i++) {
                Socket s = new Socket();
                crowd.add(s);
                s.bind(new InetSocketAddress("127.0.0.2", 0));
                s.connect(new InetSocketAddress("127.0.0.1", server.port()), 30_000);
                s.getOutputStream().write("GET /qu".getBytes(StandardCharsets.ISO_8859_1));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (server.evictedConnections() < 5 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(5, server.evictedConnections(), "12 + 1 connections, cap 8");
            legit.getOutputStream().write(req, headEnd, req.length - headEnd);
            legit.getOutputStream().flush();
            String answer = new String(legit.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(answer.startsWith("HTTP/1.1 200 "), answer);
        } finally {
            for (Socket s : crowd) {
                s.close();
            }
        }
        assertEquals(1, server.workers().engines().size());
    }

    private void awaitOpen(int n) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (server.openConnections() < n && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(n, server.openConnections());
    }

    private void hammer(MooncakeBootstrapServer.Limits limits, boolean churn) throws Exception {
        server = new MooncakeBootstrapServer("127.0.0.1", 0, limits);
        server.start();
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        // key "dp/tp/pp" -> addr, for every registration answered 200
        Map<String, String> accepted = new ConcurrentHashMap<>();
        CountDownLatch go = new CountDownLatch(1);
        List<Future<?>> done = new ArrayList<>();
        try (ExecutorService pool = Executors.newFixedThreadPool(CLIENTS + 4)) {
            for (int c = 0; c < CLIENTS; c++) {
                int client = c;
                done.add(pool.submit(() -> {
                    go.await();
                    for (int i = 0; i < REQUESTS; i++) {
                        if (i % 2 == 0) {
                            Outcome o = exchange("GET /query HTTP/1.1\r\nHost: x\r\n\r\n"
                                    .getBytes(StandardCharsets.ISO_8859_1));
                            if (o.status != 200 && !(churn && o.status == 503)) {
                                failures.add("query " + client + "/" + i + ": " + o);
                            }
                        } else {
                            // dp shared by 4 clients (same engine id), so ranks collide across clients too
                            int dp = client / 4;
                            int tp = (client % 4) * 100 + i % 7;
                            int pp = i % 3;
                            String addr = "tcp://10.0." + client + "." + i + ":5000";
                            Outcome o = exchange(register("engine-" + dp, dp, tp, pp, addr));
                            if (o.status == 200) {
                                String prev = accepted.putIfAbsent(dp + "/" + tp + "/" + pp, addr);
                                if (prev != null) {
                                    failures.add("two 200s for " + dp + "/" + tp + "/" + pp);
                                }
                            } else if (!(churn && o.status == 503)
                                    && (o.status != 400 || !o.body.contains("already registered"))) {
                                failures.add("register " + client + "/" + i + ": " + o);
                            }
                        }
                    }
                    return null;
                }));
            }
            if (churn) {
                for (int c = 0; c < 4; c++) {
                    done.add(pool.submit(() -> {
                        go.await();
                        for (int i = 0; i < 50; i++) {
                            try (Socket s = new Socket()) {
                                s.connect(new InetSocketAddress("127.0.0.1", server.port()), 30_000);
                                if (i % 2 == 1) {
                                    s.getOutputStream().write("POST /register HTTP/1.1\r\nContent-Le"
                                            .getBytes(StandardCharsets.ISO_8859_1));
                                }
                            } catch (IOException e) {
                                // the server may close a churning connection first: that is its right
                            }
                        }
                        return null;
                    }));
                }
            }
            go.countDown();
            for (Future<?> f : done) {
                f.get();
            }
        }
        assertTrue(failures.isEmpty(), failures.size() + " requests failed, among them: "
                + failures.stream().limit(10).toList());
        Map<String, String> table = new ConcurrentHashMap<>();
        server.workers().engines().forEach((dp, e) -> e.workerAddr().forEach((tp, pps) -> pps.forEach(
                (pp, addr) -> table.put(dp + "/" + tp + "/" + pp, addr))));
        assertEquals(accepted, table, "the table is what was answered 200");
        Outcome q = exchange("GET /query HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
        assertEquals(200, q.status);
        assertEquals(table.keySet().stream().map(k -> k.substring(0, k.indexOf('/'))).distinct().count(),
                ((Map<?, ?>) Json.parse(q.body)).size());
    }
}
