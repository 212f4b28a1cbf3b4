package io.mooncake4j.proxy;

import io.mooncake4j.http.HttpLimits;

import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * What {@link DisaggProxy} routes to and how: the prefill (P) nodes with their bootstrap ports, the
 * decode (D) nodes, the address it listens on, and the bounds it keeps. Immutable; build with
 * {@link #builder()}, which validates once.
 *
 * @param prefill         P nodes, at least one, in round-robin order
 * @param decode          D nodes, at least one, in round-robin order
 * @param host            address to listen on ({@code 127.0.0.1} by default, as vLLM's proxy)
 * @param port            port to listen on; 0 lets the OS pick
 * @param requestTimeout  bound on one proxied request from arrival to the last byte of D's answer
 * @param probeInterval   pause between readiness probes of a node that is not (or no longer) ready
 * @param probeTimeout    bound on one probe ({@code /health} or bootstrap {@code /query})
 * @param maxBodyBytes    largest client request body accepted (larger: 413)
 * @param maxInFlight     requests handled at once (more: 503 with a retry hint); a request counts once
 *                        its body has arrived, so slow uploads do not hold these
 * @param http            the HTTP front door's deadlines and per-client shares of body-upload and
 *                        in-flight slots ({@code --http-*} flags)
 */
public record ProxyConfig(List<PrefillNode> prefill, List<DecodeNode> decode, String host, int port,
        Duration requestTimeout, Duration probeInterval, Duration probeTimeout, int maxBodyBytes, int maxInFlight,
        HttpLimits http) {

    /** vLLM's default bootstrap port ({@code VLLM_MOONCAKE_BOOTSTRAP_PORT}), used when a P gives none. */
    public static final int DEFAULT_BOOTSTRAP_PORT = 8998;

    /**
     * One prefill node.
     *
     * @param url           base URL of its OpenAI-compatible server, {@code http://host:port}
     * @param bootstrapPort port of its Mooncake bootstrap server (on the same host)
     */
    public record PrefillNode(URI url, int bootstrapPort) {
        public PrefillNode {
            url = checkUrl(url, "prefill");
            if (bootstrapPort < 1 || bootstrapPort > 65535) {
                throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "bootstrap port of prefill node %s must be within 1..65535, got %d", url, bootstrapPort));
            }
        }

        /** The bootstrap server's base URL, {@code http://<P's host>:<bootstrapPort>}, as D is told. */
        public String bootstrapAddr() {
            String h = url.getHost();
            if (h.indexOf(':') >= 0 && !h.startsWith("[")) {
                h = "[" + h + "]";
            }
            return "http://" + h + ":" + bootstrapPort;
        }
    }

    /**
     * One decode node.
     *
     * @param url base URL of its OpenAI-compatible server, {@code http://host:port}
     */
    public record DecodeNode(URI url) {
        public DecodeNode {
            url = checkUrl(url, "decode");
        }
    }

    public ProxyConfig {
        prefill = List.copyOf(prefill);
        decode = List.copyOf(decode);
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(requestTimeout, "requestTimeout");
        Objects.requireNonNull(probeInterval, "probeInterval");
        Objects.requireNonNull(probeTimeout, "probeTimeout");
        Objects.requireNonNull(http, "http");
        if (prefill.isEmpty()) {
            throw new IllegalArgumentException("the proxy needs at least one prefill node (--prefill URL [BOOTSTRAP_PORT])");
        }
        if (decode.isEmpty()) {
            throw new IllegalArgumentException("the proxy needs at least one decode node (--decode URL)");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be within 0..65535, got " + port);
        }
        for (Duration d : List.of(requestTimeout, probeInterval, probeTimeout)) {
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("timeouts and intervals must be positive, got " + d);
            }
        }
        if (maxBodyBytes <= 0 || maxInFlight <= 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "maxBodyBytes and maxInFlight must be positive, got %d and %d", maxBodyBytes, maxInFlight));
        }
    }

    private static URI checkUrl(URI url, String role) {
        Objects.requireNonNull(url, role + " url");
        String scheme = url.getScheme();
        if (scheme == null || !scheme.equalsIgnoreCase("http") || url.getHost() == null || url.getPort() < 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "%s node URL must look like http://host:port, got '%s'", role, url));
        }
        String path = url.getRawPath();
        if (path != null && !path.isEmpty() && !path.equals("/")) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "%s node URL must have no path (the proxy adds /v1/...), got '%s'", role, url));
        }
        return URI.create("http://" + url.getRawAuthority());
    }

    /** Parses a node URL, naming the role in the error. */
    public static URI parseUrl(String text, String role) {
        try {
            return checkUrl(new URI(text), role);
        } catch (java.net.URISyntaxException e) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "%s node URL '%s' is not a URL: %s", role, text, e.getMessage()), e);
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Builder with the defaults of {@code bin/mooncake4j proxy}. */
    public static final class Builder {
        private final List<PrefillNode> prefill = new ArrayList<>();
        private final List<DecodeNode> decode = new ArrayList<>();
        private String host = "127.0.0.1";
        private int port = 8000;
        private Duration requestTimeout = Duration.ofMinutes(10);
        private Duration probeInterval = Duration.ofSeconds(1);
        private Duration probeTimeout = Duration.ofSeconds(5);
        private int maxBodyBytes = 32 << 20;
        private int maxInFlight = 4096;
        private HttpLimits http = HttpLimits.defaults();

        private Builder() {}

        public Builder addPrefill(String url, int bootstrapPort) {
            prefill.add(new PrefillNode(parseUrl(url, "prefill"), bootstrapPort));
            return this;
        }

        public Builder addPrefill(String url) {
            return addPrefill(url, DEFAULT_BOOTSTRAP_PORT);
        }

        public Builder addDecode(String url) {
            decode.add(new DecodeNode(parseUrl(url, "decode")));
            return this;
        }

        public Builder host(String v) {
            host = v;
            return this;
        }

        public Builder port(int v) {
            port = v;
            return this;
        }

        public Builder requestTimeout(Duration v) {
            requestTimeout = v;
            return this;
        }

        public Builder probeInterval(Duration v) {
            probeInterval = v;
            return this;
        }

        public Builder probeTimeout(Duration v) {
            probeTimeout = v;
            return this;
        }

        public Builder maxBodyBytes(int v) {
            maxBodyBytes = v;
            return this;
        }

        public Builder maxInFlight(int v) {
            maxInFlight = v;
            return this;
        }

        public Builder http(HttpLimits v) {
            http = v;
            return this;
        }

        public ProxyConfig build() {
            return new ProxyConfig(prefill, decode, host, port, requestTimeout, probeInterval, probeTimeout,
                    maxBodyBytes, maxInFlight, http);
        }
    }
}
