package io.mooncake4j.metadata;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;

/**
 * Mooncake's HTTP metadata protocol ({@code HTTPStoragePlugin}; served by
 * {@code mooncake_master --enable_http_metadata_server} and by Mooncake's standalone metadata
 * servers): {@code GET|PUT|DELETE <base>?key=<escaped key>}, the value the raw body, 200 for
 * success, 404 for an absent key. Keys are escaped as curl does (every byte but the unreserved
 * {@code A-Z a-z 0-9 - . _ ~} percent-encoded). Timeouts are Mooncake's (connect 1.5 s, request
 * 3 s); a value longer than {@link #MAX_VALUE_BYTES} is refused, not read. Thread-safe.
 */
public final class HttpMetadataStore implements MetadataStore {

    /** The longest value read: a descriptor with thousands of buffers is far below it. */
    public static final int MAX_VALUE_BYTES = 8 << 20;

    private static final Duration CONNECT_TIMEOUT = Duration.ofMillis(1500);
    private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(3);

    private final String base;
    private final HttpClient http;

    private HttpMetadataStore(String base) {
        this.base = base;
        this.http = HttpClient.newBuilder().connectTimeout(CONNECT_TIMEOUT).version(HttpClient.Version.HTTP_1_1).build();
    }

    /**
     * @param url the {@code metadata_server} setting, {@code http://host:port/metadata}
     * @return a store talking to it
     * @throws IllegalArgumentException when {@code url} is not an http URL with a host
     */
    public static HttpMetadataStore of(String url) {
        URI u;
        try {
            u = URI.create(url);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("metadata_server '" + url + "' is not a URL: " + e.getMessage(), e);
        }
        if (!"http".equalsIgnoreCase(u.getScheme()) || u.getHost() == null || u.getRawQuery() != null) {
            throw new IllegalArgumentException("metadata_server '" + url
                    + "' must be http://host:port/path (e.g. http://127.0.0.1:8080/metadata), without a query");
        }
        return new HttpMetadataStore(url);
    }

    /** {@return the base URL, e.g. {@code http://127.0.0.1:8080/metadata}} */
    public String url() {
        return base;
    }

    /** {@return {@code key} escaped as curl's {@code curl_easy_escape} does} */
    static String escape(String key) {
        StringBuilder sb = new StringBuilder();
        for (byte b : key.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            if (c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
                    || c == '~') {
                sb.append((char) c);
            } else {
                sb.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
                        .append(Character.toUpperCase(Character.forDigit(c & 15, 16)));
            }
        }
        return sb.toString();
    }

    private HttpRequest.Builder request(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("metadata key must not be empty");
        }
        return HttpRequest.newBuilder(URI.create(base + "?key=" + escape(key))).timeout(REQUEST_TIMEOUT);
    }

    private record Answer(int status, String body) {}

    private Answer send(String method, String key, HttpRequest request) {
        try {
            HttpResponse<InputStream> r = http.send(request, HttpResponse.BodyHandlers.ofInputStream());
            try (InputStream in = r.body()) {
                byte[] b = in.readNBytes(MAX_VALUE_BYTES + 1);
                if (b.length > MAX_VALUE_BYTES) {
                    throw new MetadataException(String.format(Locale.ROOT,
                            "%s %s key %s: the answer is longer than %d bytes; refused", method, base, key, MAX_VALUE_BYTES),
                            null);
                }
                return new Answer(r.statusCode(), new String(b, StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            throw new MetadataException(String.format(Locale.ROOT, "%s %s key %s failed: %s; is the metadata server running?",
                    method, base, key, e), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new MetadataException(method + " " + base + " key " + key + " interrupted", e);
        }
    }

    private MetadataException refused(String method, String key, Answer a) {
        String body = a.body().length() > 200 ? a.body().substring(0, 200) + "..." : a.body();
        return new MetadataException(String.format(Locale.ROOT, "%s %s key %s: HTTP %d %s", method, base, key, a.status(),
                body.strip()), null);
    }

    @Override
    public Optional<String> get(String key) {
        Answer a = send("GET", key, request(key).GET().build());
        if (a.status() == 404) {
            return Optional.empty();
        }
        if (a.status() != 200) {
            throw refused("GET", key, a);
        }
        return Optional.of(a.body());
    }

    @Override
    public void put(String key, String json) {
        Answer a = send("PUT", key, request(key).header("Content-Type", "application/json")
                .PUT(HttpRequest.BodyPublishers.ofString(json, StandardCharsets.UTF_8)).build());
        if (a.status() != 200) {
            throw refused("PUT", key, a);
        }
    }

    @Override
    public boolean delete(String key) {
        Answer a = send("DELETE", key, request(key).DELETE().build());
        if (a.status() == 404) {
            return false;
        }
        if (a.status() != 200) {
            throw refused("DELETE", key, a);
        }
        return true;
    }

    @Override
    public void close() {
        http.close();
    }

    @Override
    public String toString() {
        return "HttpMetadataStore[" + base + "]";
    }
}
