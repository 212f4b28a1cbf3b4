package io.mooncake4j.proxy;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.mooncake4j.internal.json.Json;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * An in-process node speaking vLLM's P/D HTTP contract, for the proxy tests: a P (with a bootstrap
 * server listing {@code dpSize} engines) or a D. P and D share a {@link Kv} "cache": P publishes the
 * prompt under the transfer id, D reads it back, so a completion is only right when the proxy paired
 * them with one transfer id and told D the right engine. P answers only once D's request for the same
 * transfer id has arrived, which fails (times out) unless the proxy sends both at once.
 */
final class FakeNode implements AutoCloseable {

    /** What a failing node does. */
    enum Fault {
        NONE, STATUS_500, STATUS_400, RESET, BREAK_STREAM,
        /** P answers its prefill, then stops (its port refuses) before D pulls: D answers 500, KV load failed. */
        DIE_UNDER_PULL,
        /** D sends its stream's headers, then every connection closes before the first event. */
        BREAK_BEFORE_FIRST_BYTE
    }

    /** The shared stand-in for KV transfer. */
    static final class Kv {
        final Map<String, String> published = new ConcurrentHashMap<>();
        final Map<String, CountDownLatch> decodeArrived = new ConcurrentHashMap<>();
        final Map<String, CountDownLatch> prefilled = new ConcurrentHashMap<>();
        /** Engine ids of P nodes that died: a D's pull from one fails. */
        final Set<String> dead = ConcurrentHashMap.newKeySet();

        CountDownLatch arrival(String transferId) {
            return decodeArrived.computeIfAbsent(transferId, k -> new CountDownLatch(1));
        }

        CountDownLatch prefilled(String transferId) {
            return prefilled.computeIfAbsent(transferId, k -> new CountDownLatch(1));
        }
    }

    /** The completion text every correct answer has: a function of the prompt. */
    static String expected(String prompt) {
        return new StringBuilder(prompt).reverse().toString();
    }

    final boolean prefill;
    final int dpSize;
    final Kv kv;
    final HttpServer http;
    final HttpServer bootstrap;
    final ExecutorService exec = Executors.newVirtualThreadPerTaskExecutor();
    final List<Map<String, Object>> bodies = new CopyOnWriteArrayList<>();
    final List<String> dpRankHeaders = new CopyOnWriteArrayList<>();
    final List<String> errors = new CopyOnWriteArrayList<>();
    volatile Fault fault = Fault.NONE;
    volatile int healthStatus = 200;
    volatile boolean registered = true;

    private FakeNode(boolean prefill, int dpSize, Kv kv) throws IOException {
        this.prefill = prefill;
        this.dpSize = dpSize;
        this.kv = kv;
        http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        http.setExecutor(exec);
        http.createContext("/", this::handle);
        http.start();
        if (prefill) {
            bootstrap = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
            bootstrap.setExecutor(exec);
            bootstrap.createContext("/query", this::query);
            bootstrap.start();
        } else {
            bootstrap = null;
        }
    }

    static FakeNode prefill(int dpSize, Kv kv) throws IOException {
        return new FakeNode(true, dpSize, kv);
    }

    static FakeNode decode(Kv kv) throws IOException {
        return new FakeNode(false, 0, kv);
    }

    String url() {
        return "http://127.0.0.1:" + http.getAddress().getPort();
    }

    int bootstrapPort() {
        return bootstrap.getAddress().getPort();
    }

    String bootstrapAddr() {
        return "http://127.0.0.1:" + bootstrapPort();
    }

    String engineId(int dpRank) {
        return "engine-" + http.getAddress().getPort() + "-" + dpRank;
    }

    private void query(HttpExchange ex) throws IOException {
        try (ex) {
            Map<String, Object> m = new LinkedHashMap<>();
            if (registered) {
                for (int r = 0; r < dpSize; r++) {
                    m.put(Integer.toString(r), Map.of("engine_id", engineId(r),
                            "worker_addr", Map.of("0", Map.of("0", "tcp://127.0.0.1:1"))));
                }
            }
            send(ex, 200, Json.write(m));
        }
    }

    private void handle(HttpExchange ex) throws IOException {
        String diedUnder = null;
        try (ex) {
            String path = ex.getRequestURI().getPath();
            if (path.equals("/health")) {
                ex.sendResponseHeaders(healthStatus, -1);
                return;
            }
            if (path.equals("/v1/models")) {
                send(ex, 200, "{\"object\":\"list\",\"data\":[{\"id\":\"fake\",\"object\":\"model\"}]}");
                return;
            }
            Map<String, Object> body = Json.parseObject(new String(ex.getRequestBody().readAllBytes(),
                    StandardCharsets.UTF_8));
            bodies.add(body);
            dpRankHeaders.add(String.valueOf(ex.getRequestHeaders().getFirst("X-data-parallel-rank")));
            switch (fault) {
                case STATUS_500 -> {
                    send(ex, 500, "{\"error\":{\"message\":\"fake engine crashed\",\"type\":\"server_error\"}}");
                    return;
                }
                case STATUS_400 -> {
                    send(ex, 400, "{\"error\":{\"message\":\"prompt too long\",\"type\":\"BadRequestError\"}}");
                    return;
                }
                case RESET -> {
                    ex.close(); // no answer: the connection closes without a response
                    return;
                }
                default -> { }
            }
            String prompt = String.valueOf(body.get("prompt"));
            @SuppressWarnings("unchecked")
            Map<String, Object> kvp = (Map<String, Object>) body.get("kv_transfer_params");
            String transferId = String.valueOf(kvp.get("transfer_id"));
            if (prefill) {
                prefillAnswer(ex, body, kvp, transferId, prompt);
                if (fault == Fault.DIE_UNDER_PULL) {
                    diedUnder = transferId;
                }
            } else {
                decodeAnswer(ex, body, kvp, transferId, prompt);
            }
        } catch (IOException | RuntimeException | InterruptedException e) {
            errors.add(e.toString());
        }
        if (diedUnder != null) {
            // the answer has left; now P dies, and only then may D pull (and fail)
            try {
                Thread.ofVirtual().start(this::stop).join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (int r = 0; r < dpSize; r++) {
                kv.dead.add(engineId(r));
            }
            kv.prefilled(diedUnder).countDown();
        }
    }

    private void prefillAnswer(HttpExchange ex, Map<String, Object> body, Map<String, Object> kvp, String transferId,
            String prompt) throws IOException, InterruptedException {
        if (!Boolean.TRUE.equals(kvp.get("do_remote_decode")) || !Boolean.FALSE.equals(kvp.get("do_remote_prefill"))
                || !Long.valueOf(1).equals(body.get("max_tokens")) || !Boolean.FALSE.equals(body.get("stream"))
                || body.containsKey("stream_options")) {
            errors.add("bad P request " + body);
            send(ex, 400, "{\"error\":{\"message\":\"bad P request\"}}");
            return;
        }
        if (!kv.arrival(transferId).await(10, TimeUnit.SECONDS)) {
            errors.add("D's request for " + transferId + " never arrived while P was prefilling");
            send(ex, 500, "{\"error\":{\"message\":\"no D\"}}");
            return;
        }
        kv.published.put(transferId, prompt + "@" + engineId(Integer.parseInt(
                ex.getRequestHeaders().getFirst("X-data-parallel-rank"))));
        if (fault != Fault.DIE_UNDER_PULL) {
            kv.prefilled(transferId).countDown();
        }
        send(ex, 200, "{\"id\":\"cmpl-p\",\"choices\":[{\"text\":\"x\",\"index\":0}],"
                + "\"kv_transfer_params\":{\"do_remote_prefill\":true,\"transfer_id\":\"" + transferId + "\"}}");
    }

    private void decodeAnswer(HttpExchange ex, Map<String, Object> body, Map<String, Object> kvp, String transferId,
            String prompt) throws IOException, InterruptedException {
        if (!Boolean.TRUE.equals(kvp.get("do_remote_prefill")) || !Boolean.FALSE.equals(kvp.get("do_remote_decode"))) {
            errors.add("bad D request " + body);
            send(ex, 400, "{\"error\":{\"message\":\"bad D request\"}}");
            return;
        }
        kv.arrival(transferId).countDown();
        String want = prompt + "@" + kvp.get("remote_engine_id");
        if (!kv.prefilled(transferId).await(10, TimeUnit.SECONDS)) {
            send(ex, 500, "{\"error\":{\"message\":\"KV for " + transferId + " never arrived\"}}");
            return;
        }
        if (kv.dead.contains(String.valueOf(kvp.get("remote_engine_id")))) {
            // as serve's D: the pull's error names P's engine and data address, not P's HTTP URL
            send(ex, 500, "{\"error\":{\"message\":\"request failed: KV load from engine " + kvp.get("remote_engine_id")
                    + " at tcp://127.0.0.1:1 failed: connection refused\",\"type\":\"InternalServerError\"}}");
            return;
        }
        String got = kv.published.get(transferId);
        String text = want.equals(got) ? expected(prompt) : "WRONG-KV(" + got + " vs " + want + ")";
        if (Boolean.TRUE.equals(body.get("stream"))) {
            ex.getResponseHeaders().set("Content-Type", "text/event-stream");
            ex.sendResponseHeaders(200, 0);
            OutputStream out = ex.getResponseBody();
            if (fault == Fault.BREAK_BEFORE_FIRST_BYTE) {
                out.flush();
                Thread t = Thread.ofVirtual().start(() -> http.stop(0));
                t.join();
                throw new IOException("fake D broke its stream before its first event");
            }
            for (int i = 0; i < text.length(); i++) {
                out.write(("data: {\"choices\":[{\"text\":\"" + text.charAt(i) + "\",\"index\":0}]}\n\n")
                        .getBytes(StandardCharsets.UTF_8));
                out.flush();
                if (fault == Fault.BREAK_STREAM && i == 1) {
                    // close every connection abruptly: the chunked stream ends without its last chunk
                    Thread t = Thread.ofVirtual().start(() -> http.stop(0));
                    t.join();
                    throw new IOException("fake D broke its stream");
                }
            }
            out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        } else {
            send(ex, 200, "{\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"choices\":[{\"text\":\"" + text
                    + "\",\"index\":0,\"finish_reason\":\"length\"}]}");
        }
    }

    private static void send(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
    }

    /** Stops answering (port closed: connections are refused). */
    void stop() {
        http.stop(0);
        if (bootstrap != null) {
            bootstrap.stop(0);
        }
    }

    @Override
    public void close() {
        stop();
        exec.shutdownNow();
    }
}
