package io.mooncake4j.connector.bootstrap;

import io.mooncake4j.internal.json.Json;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The bootstrap server's HTTP/1.1 framing: reading a request head within a byte bound, and writing an
 * answer with a JSON body and {@code Connection: close} ({@link MooncakeBootstrapServer}). Stateless.
 */
final class BootstrapHttp {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeBootstrapServer.class);

    private BootstrapHttp() {
    }

    record Response(int status, Object body) {
    }

    /** A parsed request head, or the error answer for it. */
    record Request(String method, String path, long contentLength, boolean expectContinue,
            Response error) {

        static Request failed(Response error) {
            return new Request(null, null, -1, false, error);
        }
    }

    /** Reads the request line and headers (up to the blank line); EOF if the client closed before that. */
    static Request readHead(InputStream in, int maxHeaderBytes) throws IOException {
        byte[] buf = new byte[Math.min(maxHeaderBytes, 4096)];
        int n = 0;
        int end = -1;
        while (end < 0) {
            if (n == buf.length) {
                if (n >= maxHeaderBytes) {
                    return Request.failed(detail(431, "Request header fields too large (more than "
                            + maxHeaderBytes + " bytes)"));
                }
                buf = java.util.Arrays.copyOf(buf, Math.min(maxHeaderBytes, n * 2));
            }
            int b = in.read();
            if (b < 0) {
                throw new EOFException("closed inside the request head");
            }
            buf[n++] = (byte) b;
            if (b == '\n' && n >= 2 && (buf[n - 2] == '\n' || (n >= 3 && buf[n - 2] == '\r' && buf[n - 3] == '\n'))) {
                end = n;
            }
        }
        String head = new String(buf, 0, end, StandardCharsets.ISO_8859_1);
        String[] lines = head.split("\r?\n");
        String[] rl = lines.length == 0 ? new String[0] : lines[0].split(" ", -1);
        if (rl.length != 3 || rl[0].isEmpty() || !rl[1].startsWith("/") || !rl[2].startsWith("HTTP/1.")) {
            return Request.failed(detail(400, "Bad Request: malformed request line"));
        }
        String target = rl[1];
        int q = target.indexOf('?');
        String path = q < 0 ? target : target.substring(0, q);
        long length = -1;
        boolean chunked = false;
        boolean expect = false;
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i];
            if (line.isEmpty()) {
                continue;
            }
            int colon = line.indexOf(':');
            if (colon <= 0) {
                return Request.failed(detail(400, "Bad Request: malformed header line"));
            }
            String name = line.substring(0, colon).strip().toLowerCase(Locale.ROOT);
            String value = line.substring(colon + 1).strip();
            switch (name) {
                case "content-length" -> {
                    long l;
                    try {
                        l = Long.parseLong(value);
                    } catch (NumberFormatException e) {
                        l = -2;
                    }
                    if (l < 0 || (length >= 0 && length != l)) {
                        return Request.failed(detail(400, "Bad Request: invalid Content-Length"));
                    }
                    length = l;
                }
                case "transfer-encoding" -> chunked = !value.equalsIgnoreCase("identity");
                case "expect" -> expect = value.equalsIgnoreCase("100-continue");
                default -> {
                    // other headers are not needed
                }
            }
        }
        if (chunked) {
            return Request.failed(detail(411, "Length Required: send the body with a Content-Length"));
        }
        return new Request(rl[0], path, length, expect, null);
    }

    /** The answer, or null when the connection was evicted before the request could be acted on. */
    /** Writes the answer; a body that cannot be written as JSON becomes a fixed 422/500 answer. */
    static void write(OutputStream out, Response r, String path) throws IOException {
        byte[] body;
        Response sent = r;
        try {
            body = Json.write(r.body).getBytes(StandardCharsets.UTF_8);
        } catch (RuntimeException e) {
            LOG.warn("Mooncake bootstrap server: cannot write a {} answer as JSON ({}); sending a plain one",
                    r.status, e.toString());
            sent = r.status >= 400 && r.status < 500 ? r : new Response(500, null);
            body = (sent.status == 500 ? "{\"detail\":\"Internal Server Error\"}"
                    : "{\"detail\":\"Invalid request\"}").getBytes(StandardCharsets.UTF_8);
        }
        StringBuilder h = new StringBuilder(128);
        h.append("HTTP/1.1 ").append(sent.status).append(' ').append(reason(sent.status)).append("\r\n");
        h.append("Content-Type: application/json\r\n");
        h.append("Content-Length: ").append(body.length).append("\r\n");
        h.append("Connection: close\r\n");
        if (sent.status == 405) {
            h.append("Allow: ").append("/register".equals(path) ? "POST" : "GET").append("\r\n");
        }
        h.append("\r\n");
        out.write(h.toString().getBytes(StandardCharsets.ISO_8859_1));
        out.write(body);
        out.flush();
    }

    private static String reason(int status) {
        return switch (status) {
            case 200 -> "OK";
            case 400 -> "Bad Request";
            case 404 -> "Not Found";
            case 405 -> "Method Not Allowed";
            case 411 -> "Length Required";
            case 413 -> "Payload Too Large";
            case 422 -> "Unprocessable Entity";
            case 431 -> "Request Header Fields Too Large";
            case 503 -> "Service Unavailable";
            default -> "Internal Server Error";
        };
    }

    static Response detail(int status, String msg) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("detail", msg);
        return new Response(status, m);
    }
}
