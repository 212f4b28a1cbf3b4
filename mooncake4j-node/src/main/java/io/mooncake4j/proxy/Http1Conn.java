package io.mooncake4j.proxy;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One TCP connection of an {@link Http1Client} with its buffered streams, and the line reader its parser
 * uses. Used by one call at a time (the client's pool hands it out and takes it back); {@link #close} may
 * come from another thread (a cancel) and is idempotent.
 */
final class Http1Conn {
    final Socket socket;
    final String key;
    final BufferedInputStream in;
    final OutputStream out;
    final AtomicBoolean closed = new AtomicBoolean();
    long idleSince;
    /** Whether a byte of the current answer was read (a reused connection failing before it is stale). */
    boolean answered;
    int headerBytes;

    Http1Conn(Socket socket, String key) throws IOException {
        this.socket = socket;
        this.key = key;
        this.in = new BufferedInputStream(socket.getInputStream(), 16 << 10);
        this.out = new BufferedOutputStream(socket.getOutputStream(), 8 << 10);
    }

    /**
     * One CRLF- (or LF-) terminated ISO-8859-1 line without its end, or null at end of stream before any byte.
     *
     * @param first whether this is an answer's first line (its first byte marks the answer as begun)
     */
    String readLine(int max, boolean first) throws IOException {
        ByteArrayOutputStream b = null;
        byte[] small = new byte[128];
        int n = 0;
        while (true) {
            int ch = in.read();
            if (ch < 0) {
                if (n == 0 && b == null) {
                    return null;
                }
                throw new EOFException("connection closed inside a line from " + key);
            }
            if (first) {
                answered = true;
                first = false;
            }
            if (ch == '\n') {
                break;
            }
            if (n == small.length) {
                if (b == null) {
                    b = new ByteArrayOutputStream(256);
                }
                b.write(small, 0, n);
                n = 0;
            }
            small[n++] = (byte) ch;
            if ((b == null ? 0 : b.size()) + n > max + 1) {
                throw new IOException("line from " + key + " exceeds " + max + " bytes");
            }
        }
        String s;
        if (b == null) {
            s = new String(small, 0, n, StandardCharsets.ISO_8859_1);
        } else {
            b.write(small, 0, n);
            s = b.toString(StandardCharsets.ISO_8859_1);
        }
        if (s.endsWith("\r")) {
            s = s.substring(0, s.length() - 1);
        }
        if (s.length() > max) {
            throw new IOException("line from " + key + " exceeds " + max + " bytes");
        }
        return s;
    }

    void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing to abort or after a failure: nothing more to say
            }
        }
    }
}
