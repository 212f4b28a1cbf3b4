package io.mooncake4j.connector.bootstrap;

import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Client side of the bootstrap HTTP API: P workers {@link #register}, D workers {@link #query}.
 *
 * <p><b>Difference from vLLM:</b> vLLM's target retries {@code POST /register} every second
 * <em>forever</em> while the connection is refused (the server is not up yet). Here the retries
 * (same 1 s interval by default) stop at a caller-given deadline, after which
 * {@link BootstrapException} is thrown, so a missing server cannot hang start-up. Any other
 * failure (an HTTP error status, a timeout of an accepted connection) is not retried, as in vLLM.
 *
 * <p>Thread-safe; one client may be shared. {@link #close()} releases the underlying
 * {@link HttpClient}.
 */
public final class BootstrapClient implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(BootstrapClient.class);

    /** vLLM's retry interval while the bootstrap server refuses connections. */
    public static final Duration DEFAULT_RETRY_INTERVAL = Duration.ofSeconds(1);
    /** httpx's default timeout, used per request. */
    public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(5);

    private final HttpClient http;
    private final Duration requestTimeout;
    private final Duration retryInterval;
    private final Runnable onConnectionRefused;

    /** A client with the default request timeout (5 s) and retry interval (1 s). */
    public BootstrapClient() {
        this(DEFAULT_REQUEST_TIMEOUT, DEFAULT_RETRY_INTERVAL);
    }

    /**
     * @param requestTimeout bound on connecting and on each request's answer
     * @param retryInterval  pause between registration attempts while the connection is refused
     */
    public BootstrapClient(Duration requestTimeout, Duration retryInterval) {
        this(requestTimeout, retryInterval, () -> { });
    }

    /** As above, calling {@code onConnectionRefused} after each refused registration attempt (tests). */
    BootstrapClient(Duration requestTimeout, Duration retryInterval, Runnable onConnectionRefused) {
        this.requestTimeout = positive(requestTimeout, "requestTimeout");
        this.retryInterval = positive(retryInterval, "retryInterval");
        this.onConnectionRefused = Objects.requireNonNull(onConnectionRefused, "onConnectionRefused");
        this.http = HttpClient.newBuilder()
                .connectTimeout(requestTimeout)
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .build();
    }

    private static Duration positive(Duration d, String name) {
        if (d == null || d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException(name + " must be positive, got " + d);
        }
        return d;
    }

    /**
     * vLLM's {@code register_worker_with_bootstrap}: {@code POST <baseUrl>/register}, retrying
     * every retry interval while the connection is refused, until {@code deadline} has passed.
     *
     * @param baseUrl  e.g. {@code http://10.0.0.2:8998} (see {@link BootstrapAddresses#httpUrl})
     * @param payload  this worker's registration
     * @param deadline how long to keep retrying a refused connection
     * @throws BootstrapException on an error status (its message carries the server's detail),
     *                            an unreachable server at the deadline, or interruption
     */
    public void register(String baseUrl, RegisterWorkerPayload payload, Duration deadline) {
        URI uri = uri(baseUrl, "/register");
        long deadlineNanos = System.nanoTime() + deadline.toNanos();
        HttpRequest req = HttpRequest.newBuilder(uri)
                .timeout(requestTimeout)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(payload.toJson(), StandardCharsets.UTF_8))
                .build();
        int attempts = 0;
        while (true) {
            attempts++;
            HttpResponse<String> resp;
            try {
                resp = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
            } catch (IOException e) {
                if (!isConnectionRefused(e)) {
                    throw failed(payload, uri, "error registering " + payload + " with bootstrap server " + uri
                            + ": " + e, BootstrapException.NO_RESPONSE, "", e);
                }
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    throw failed(payload, uri, String.format(Locale.ROOT,
                            "Failed to register %s with the Mooncake bootstrap server at %s: connection refused "
                                    + "for %d attempts over %d ms; is the P worker with tp_rank=0, pp_rank=0 running "
                                    + "its bootstrap server on that address?", payload, uri, attempts,
                            deadline.toMillis()), BootstrapException.NO_RESPONSE, "", e);
                }
                LOG.debug("Bootstrap server {} not up yet (attempt {}); retrying", uri, attempts);
                onConnectionRefused.run();
                pause(Math.min(left, retryInterval.toNanos()), payload, uri);
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw failed(payload, uri, "interrupted while registering " + payload + " with " + uri,
                        BootstrapException.NO_RESPONSE, "", e);
            }
            if (resp.statusCode() / 100 != 2) {
                throw failed(payload, uri, String.format(Locale.ROOT,
                        "Error registering %s with bootstrap server %s: HTTP %d %s", payload, uri,
                        resp.statusCode(), resp.body()), resp.statusCode(), resp.body(), null);
            }
            LOG.debug("Registered {} with bootstrap server {}", payload, uri);
            return;
        }
    }

    private static BootstrapException failed(RegisterWorkerPayload payload, URI uri, String msg, int status,
            String body, Throwable cause) {
        // thrown, not logged: the caller decides (style: never log and rethrow the same error)
        return new BootstrapException(msg, status, body, cause);
    }

    private static void pause(long nanos, RegisterWorkerPayload payload, URI uri) {
        try {
            Thread.sleep(Duration.ofNanos(nanos));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BootstrapException("interrupted while registering " + payload + " with " + uri,
                    BootstrapException.NO_RESPONSE, "", e);
        }
    }

    private static boolean isConnectionRefused(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ConnectException) {
                return true;
            }
        }
        return false;
    }

    /**
     * vLLM's {@code _connect_to_prefiller_bootstrap}: {@code GET <baseUrl>/query}, no retry.
     *
     * @param baseUrl the request's {@code remote_bootstrap_addr}, e.g. {@code http://10.0.0.2:8998}
     * @throws BootstrapException if the server cannot be reached, answers an error status, or
     *                            answers JSON of the wrong shape
     */
    public BootstrapQueryResult query(String baseUrl) {
        URI uri = uri(baseUrl, "/query");
        HttpRequest req = HttpRequest.newBuilder(uri).timeout(requestTimeout).GET().build();
        HttpResponse<String> resp;
        try {
            resp = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new BootstrapException("Failed to connect to bootstrap server " + baseUrl + ": " + e,
                    BootstrapException.NO_RESPONSE, "", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BootstrapException("interrupted while querying bootstrap server " + baseUrl,
                    BootstrapException.NO_RESPONSE, "", e);
        }
        if (resp.statusCode() != 200) {
            throw new BootstrapException(String.format(Locale.ROOT,
                    "Failed to connect to bootstrap server %s: HTTP %d %s", baseUrl, resp.statusCode(), resp.body()),
                    resp.statusCode(), resp.body(), null);
        }
        try {
            return parseQuery(resp.body());
        } catch (IllegalArgumentException e) { // JsonException included
            throw new BootstrapException("Failed to connect to bootstrap server " + baseUrl
                    + ": unexpected /query answer: " + e.getMessage(), resp.statusCode(), resp.body(), e);
        }
    }

    /** Parses a {@code /query} JSON body; throws {@link IllegalArgumentException} on a wrong shape. */
    static BootstrapQueryResult parseQuery(String json) {
        Map<String, Object> root = Json.parseObject(json);
        Map<Integer, EngineEntry> out = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : root.entrySet()) {
            int dp = rank(e.getKey(), "dp_rank");
            Map<?, ?> entry = object(e.getValue(), "entry of dp_rank " + dp);
            if (!(entry.get("engine_id") instanceof String engineId)) {
                throw new IllegalArgumentException("engine_id of dp_rank " + dp + " is not a string");
            }
            Map<?, ?> tps = object(entry.get("worker_addr"), "worker_addr of dp_rank " + dp);
            Map<Integer, Map<Integer, String>> workerAddr = new LinkedHashMap<>();
            for (Map.Entry<?, ?> t : tps.entrySet()) {
                int tp = rank((String) t.getKey(), "tp_rank");
                Map<Integer, String> pps = new LinkedHashMap<>();
                for (Map.Entry<?, ?> p : object(t.getValue(), "tp_rank " + tp).entrySet()) {
                    int pp = rank((String) p.getKey(), "pp_rank");
                    if (!(p.getValue() instanceof String a)) {
                        throw new IllegalArgumentException("address of pp_rank " + pp + " is not a string");
                    }
                    pps.put(pp, a);
                }
                workerAddr.put(tp, pps);
            }
            Object layout = entry.get(RegisterWorkerPayload.KV_LAYOUT_KEY);
            out.put(dp, new EngineEntry(engineId, workerAddr, layout instanceof String l ? l : null));
        }
        return new BootstrapQueryResult(out);
    }

    private static Map<?, ?> object(Object v, String what) {
        if (!(v instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(what + " is not a JSON object");
        }
        return m;
    }

    private static int rank(String key, String what) {
        try {
            return Integer.parseInt(key);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(what + " key '" + key + "' is not an integer", e);
        }
    }

    private static URI uri(String baseUrl, String path) {
        Objects.requireNonNull(baseUrl, "baseUrl");
        try {
            return URI.create(baseUrl + path);
        } catch (IllegalArgumentException e) {
            throw new BootstrapException("invalid bootstrap address '" + baseUrl + "': " + e.getMessage(),
                    BootstrapException.NO_RESPONSE, "", e);
        }
    }

    @Override
    public void close() {
        http.close();
    }
}
