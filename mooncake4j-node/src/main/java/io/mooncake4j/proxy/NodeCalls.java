package io.mooncake4j.proxy;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/**
 * Helpers of {@link DisaggProxy}'s calls to P and D nodes: the bodies P and D get, bounded reads of a node's answer, the request
 * deadline, cancelling a call (closing an answer that already came), and how a failure is classified
 * (the node is not there, or slow, or erroring) and described in the client's error message. Stateless.
 */
final class NodeCalls {

    private NodeCalls() {
    }

    static final class BodyTooLargeException extends IOException {
        static final long serialVersionUID = 1L;

        BodyTooLargeException() {
            super("body too large");
        }
    }

    /**
     * P's body: the client's with {@code kv_transfer_params = {do_remote_decode: true, do_remote_prefill:
     * false, transfer_id}}, not streamed, one token, no {@code stream_options}.
     */
    static Map<String, Object> prefillBody(Map<String, Object> req, String transferId) {
        Map<String, Object> body = new LinkedHashMap<>(req);
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("do_remote_decode", true);
        params.put("do_remote_prefill", false);
        params.put("transfer_id", transferId);
        body.put("kv_transfer_params", params);
        body.put("stream", false);
        body.put("max_tokens", 1);
        if (body.containsKey("max_completion_tokens")) {
            body.put("max_completion_tokens", 1);
        }
        body.remove("stream_options");
        return body;
    }

    /** D's body: the client's with the {@code kv_transfer_params} that name P's engine. */
    static Map<String, Object> decodeBody(Map<String, Object> req, String bootstrapAddr, String engineId,
            String transferId) {
        Map<String, Object> body = new LinkedHashMap<>(req);
        Map<String, Object> params = new LinkedHashMap<>();
        params.put("do_remote_decode", false);
        params.put("do_remote_prefill", true);
        params.put("remote_bootstrap_addr", bootstrapAddr);
        params.put("remote_engine_id", engineId);
        params.put("transfer_id", transferId);
        body.put("kv_transfer_params", params);
        return body;
    }

    static byte[] readBounded(InputStream in, int limit) throws IOException {
        try (in) {
            byte[] b = in.readNBytes(limit);
            if (in.read() >= 0) {
                throw new BodyTooLargeException();
            }
            return b;
        }
    }

    static long remaining(long deadline) throws TimeoutException {
        long r = deadline - System.nanoTime();
        if (r <= 0) {
            throw new TimeoutException();
        }
        return r;
    }

    static long remainingOrZero(long deadline) {
        return Math.max(0, deadline - System.nanoTime());
    }

    static void cancel(CompletableFuture<Http1Client.Response> f) {
        if (!f.cancel(true) && f.isDone() && !f.isCompletedExceptionally()) {
            closeQuietly(f.getNow(null).body());
        }
    }

    static void closeQuietly(InputStream in) {
        try {
            in.close();
        } catch (IOException ignored) {
            // closing to abort; the stream's error is not news
        }
    }

    static Throwable unwrap(Throwable e) {
        Throwable c = e;
        while ((c instanceof ExecutionException || c instanceof CompletionException) && c.getCause() != null) {
            c = c.getCause();
        }
        return c;
    }

    /** A failure that says the node is not there (as opposed to a slow or erroring node). */
    static boolean unreachable(Throwable c) {
        return c instanceof ConnectException || c instanceof HttpConnectTimeoutException
                || (c instanceof IOException && !(c instanceof HttpTimeoutException));
    }

    static String describe(Throwable e) {
        Throwable c = unwrap(e);
        if (c instanceof ConnectException || c.getCause() instanceof ConnectException) {
            return "connection refused";
        }
        if (c instanceof HttpConnectTimeoutException) {
            return "connect timed out";
        }
        if (c instanceof HttpTimeoutException) {
            return "timed out";
        }
        String m = c.getMessage();
        return c.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    static boolean failedOrError(CompletableFuture<Http1Client.Response> f) {
        if (!f.isDone()) {
            return false;
        }
        if (f.isCompletedExceptionally()) {
            return true;
        }
        return f.getNow(null).statusCode() / 100 != 2;
    }
}
