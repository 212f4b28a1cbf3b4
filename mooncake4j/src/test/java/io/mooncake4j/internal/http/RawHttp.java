package io.mooncake4j.internal.http;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;

/**
 * One plain socket speaking HTTP/1.1 the way a client that sends its whole body before reading does
 * (curl, most scripts): what {@code java.net.http.HttpClient} hides, because it reads while it sends.
 */
public final class RawHttp implements AutoCloseable {

    private final Socket socket;
    private final OutputStream out;
    private final InputStream in;

    public RawHttp(int port) throws IOException {
        socket = new Socket();
        socket.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        socket.setSoTimeout(30_000);
        out = socket.getOutputStream();
        in = socket.getInputStream();
    }

    /** Sends a POST of {@code bodyBytes} bytes of {@code fill} (a JSON string's inside), chunked or with a length. */
    public void post(String path, long bodyBytes, boolean chunked) throws IOException {
        String head = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + (chunked ? "Transfer-Encoding: chunked\r\n" : "Content-Length: " + bodyBytes + "\r\n") + "\r\n";
        out.write(head.getBytes(StandardCharsets.US_ASCII));
        byte[] chunk = new byte[64 << 10];
        Arrays.fill(chunk, (byte) 'x');
        chunk[0] = '{';
        long left = bodyBytes;
        while (left > 0) {
            int n = (int) Math.min(chunk.length, left);
            if (chunked) {
                out.write((Integer.toHexString(n) + "\r\n").getBytes(StandardCharsets.US_ASCII));
            }
            out.write(chunk, 0, n);
            if (chunked) {
                out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            chunk[0] = 'x';
            left -= n;
        }
        if (chunked) {
            out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        }
        out.flush();
    }

    /** Sends a GET with no body. */
    public void get(String path) throws IOException {
        out.write(("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    /** A reply: its status and its body (read by {@code Content-Length}). */
    public record Reply(int status, String head, String body) {}

    /** Reads one reply with a {@code Content-Length} body. */
    public Reply reply() throws IOException {
        String head = line();
        StringBuilder all = new StringBuilder(head);
        long length = 0;
        for (String h = line(); !h.isEmpty(); h = line()) {
            all.append('\n').append(h);
            if (h.toLowerCase(Locale.ROOT).startsWith("content-length:")) {
                length = Long.parseLong(h.substring(h.indexOf(':') + 1).trim());
            }
        }
        String[] parts = head.split(" ", 3);
        if (parts.length < 2 || !parts[0].startsWith("HTTP/1.")) {
            throw new IOException("not an HTTP status line: " + head);
        }
        byte[] body = in.readNBytes((int) length);
        return new Reply(Integer.parseInt(parts[1]), all.toString(), new String(body, StandardCharsets.UTF_8));
    }

    private String line() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (int c = in.read(); c != '\n'; c = in.read()) {
            if (c < 0) {
                throw new IOException("the connection ended inside a reply's head");
            }
            if (c != '\r') {
                b.write(c);
            }
        }
        return b.toString(StandardCharsets.US_ASCII);
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
