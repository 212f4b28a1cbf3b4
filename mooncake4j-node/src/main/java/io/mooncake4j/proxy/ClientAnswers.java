package io.mooncake4j.proxy;

import io.mooncake4j.http.Exchange;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.mooncake4j.proxy.NodeCalls.closeQuietly;
import static io.mooncake4j.proxy.NodeCalls.describe;
import static io.mooncake4j.proxy.NodeCalls.readBounded;
import static io.mooncake4j.proxy.NodeCalls.remainingOrZero;

/**
 * What {@link DisaggProxy} writes to its client: OpenAI-style JSON errors (a node's own 4xx passed on, the
 * rest as 502), and D's successful answer, copied whole or streamed chunk by chunk as it arrives, with an SSE
 * error event when D's stream breaks after its first bytes; and the body of a request it rejects, read away
 * so that the connection can be reused. Stateless: each call runs on the client
 * request's virtual thread and counts into the proxy's {@link ProxyStats}.
 */
final class ClientAnswers {

    private ClientAnswers() {
    }

    static Map<String, Object> errorBody(int code, String type, String message) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("message", message);
        e.put("type", type);
        e.put("param", null);
        e.put("code", code);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("error", e);
        return m;
    }

    /**
     * A request's failure, not sent yet: the answer's status, type and message, the node the proxy blames
     * ({@code failed_node}, its URL, and {@code failed_role}, {@code prefill} or {@code decode}, in the
     * answer's {@code error} object) and whether another P may serve the request.
     */
    record Failure(int status, String type, String message, String failedNode, String role, boolean retryable) {}

    /** A node's own error as a failure: its 4xx is passed on (not retried), anything else becomes 502. */
    static Failure nodeFailure(int status, byte[] body, String name, String transferId, String url, String role) {
        String detail = new String(body, StandardCharsets.UTF_8);
        try {
            Map<String, Object> m = Json.parseObject(detail);
            if (m.get("error") instanceof Map<?, ?> e && e.get("message") instanceof String s) {
                detail = s;
            } else if (m.get("message") instanceof String s) {
                detail = s;
            } else if (m.get("detail") != null) {
                detail = String.valueOf(m.get("detail"));
            }
        } catch (JsonException notJson) {
            if (detail.length() > 500) {
                detail = detail.substring(0, 500) + "...";
            }
        }
        boolean client = status / 100 == 4;
        String msg = String.format(Locale.ROOT, "%s answered %d on request %s: %s", name, status, transferId,
                detail.isBlank() ? "(empty body)" : detail);
        return new Failure(client ? status : 502, client ? "invalid_request_error" : "upstream_error", msg, url, role,
                !client);
    }

    /** Sends {@code f} with its {@code failed_node} and {@code failed_role}. */
    static void sendFailure(Exchange ex, Failure f) throws IOException {
        Map<String, Object> body = errorBody(f.status(), f.type(), f.message());
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) body.get("error");
        e.put("failed_node", f.failedNode());
        e.put("failed_role", f.role());
        sendJson(ex, f.status(), Json.write(body));
    }

    static void sendError(Exchange ex, int code, String type, String message) throws IOException {
        sendJson(ex, code, Json.write(errorBody(code, type, message)));
    }

    static void sendJson(Exchange ex, int code, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.setHeader("Content-Type", "application/json");
        ex.sendResponseHeaders(code, b.length);
        ex.responseBody().write(b);
    }


    /**
     * Streams or copies D's successful answer to the client; null when it was sent (or broke off after
     * its first bytes reached the client: then the stream ends with an SSE error event), else the failure,
     * not sent yet: D's answer broke off before anything of it was sent (retryable, blamed on D).
     */
    static Failure relay(Exchange ex, Http1Client.Response dr, boolean stream, String dName, String dUrl,
            String transferId, long deadline, ProxyStats stats) throws IOException {
        InputStream in = dr.body();
        String type = dr.header("Content-Type").orElse(stream ? "text/event-stream" : "application/json");
        if (!stream) {
            byte[] body;
            try {
                body = readBounded(in, DisaggProxy.MAX_NODE_BODY);
            } catch (NodeCalls.BodyTooLargeException e) {
                throw e;
            } catch (IOException e) {
                return new Failure(502, "upstream_error", String.format(Locale.ROOT,
                        "%s broke off its answer to request %s (%s)", dName, transferId, describe(e)), dUrl, "decode",
                        true);
            }
            ex.setHeader("Content-Type", type);
            sendCounted(ex, dr.statusCode(), body, stats);
            return null;
        }
        // A stalled D stream is cut at the request deadline.
        CompletableFuture<Void> cutoff = CompletableFuture.runAsync(() -> closeQuietly(in),
                CompletableFuture.delayedExecutor(Math.max(1, remainingOrZero(deadline)), TimeUnit.NANOSECONDS));
        try {
            byte[] buf = new byte[16 << 10];
            // the client's headers leave with D's first bytes: a stream that breaks before them is a failure
            // that another try may serve
            int n;
            try {
                n = in.read(buf);
            } catch (IOException e) {
                boolean late = cutoff.isDone();
                return new Failure(late ? 504 : 502, "upstream_error", String.format(Locale.ROOT,
                        "%s broke off its stream for request %s before its first byte (%s)", dName, transferId,
                        late ? "no byte within the request timeout" : describe(e)), dUrl, "decode", !late);
            }
            ex.setHeader("Content-Type", type);
            ex.setHeader("Cache-Control", "no-cache");
            ex.sendResponseHeaders(dr.statusCode(), 0);
            OutputStream out = ex.responseBody();
            while (n >= 0) {
                try {
                    out.write(buf, 0, n);
                    out.flush();
                } catch (IOException e) {
                    closeQuietly(in); // the client left: stop D's generation
                    throw e;
                }
                try {
                    n = in.read(buf);
                } catch (IOException e) {
                    stats.failedDecode.incrementAndGet();
                    String msg = String.format(Locale.ROOT, "%s broke off its stream for request %s (%s)", dName,
                            transferId, cutoff.isDone() ? "no end within the request timeout" : describe(e));
                    Map<String, Object> body = errorBody(502, "upstream_error", msg);
                    @SuppressWarnings("unchecked")
                    Map<String, Object> err = (Map<String, Object>) body.get("error");
                    err.put("failed_node", dUrl);
                    err.put("failed_role", "decode");
                    out.write(("data: " + Json.write(body) + "\n\n").getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    return null;
                }
            }
            stats.succeeded.incrementAndGet();
            return null;
        } finally {
            cutoff.cancel(false);
            closeQuietly(in);
        }
    }

    /**
     * Sends a whole answer and counts it as succeeded before its last byte leaves, so that a client
     * that has read the answer always sees the count (a body over the server's 8 KiB buffer goes out
     * as it is written, before {@code write} returns). A failure detected while sending uncounts it.
     */
    private static void sendCounted(Exchange ex, int status, byte[] body, ProxyStats stats) throws IOException {
        boolean counted = false;
        try {
            if (body.length == 0) {
                stats.succeeded.incrementAndGet();
                counted = true;
                ex.sendResponseHeaders(status, -1); // the headers are the whole answer
                return;
            }
            ex.sendResponseHeaders(status, body.length);
            OutputStream out = ex.responseBody();
            out.write(body, 0, body.length - 1);
            stats.succeeded.incrementAndGet();
            counted = true;
            out.write(body, body.length - 1, 1);
            out.flush(); // a client gone by now shows here, not only at close
        } catch (IOException e) {
            if (counted) {
                stats.succeeded.decrementAndGet();
            }
            throw e;
        }
    }

    /**
     * Reads and discards (through a small buffer, up to the body limit) a rejected request's body so the
     * connection can be reused.
     */
    static void drain(Exchange ex, long limit) {
        try {
            InputStream in = ex.requestBody();
            byte[] sink = new byte[8 << 10];
            long left = limit;
            int n;
            while (left > 0 && (n = in.read(sink, 0, (int) Math.min(sink.length, left))) >= 0) {
                left -= n;
            }
        } catch (IOException ignored) {
            // the answer is an error anyway
        }
    }
}
