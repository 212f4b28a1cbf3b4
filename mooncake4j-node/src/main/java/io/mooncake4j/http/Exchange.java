package io.mooncake4j.http;

import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * One HTTP request and its response, for a handler that blocks (it runs on its own virtual thread):
 * the request's line, headers and body as a stream, and a response started with
 * {@link #sendResponseHeaders(int, long)} as the JDK's {@code HttpExchange} does it, so that a route
 * reads the same on any server. Used by one thread at a time.
 */
public final class Exchange {

    private static final int RESPONSE_BUFFER = 16 << 10;

    private final Request request;
    private final Response response;
    private final Deadlines deadlines;
    private InputStream body;
    private Deadlines.BodyWatch bodyWatch;
    private OutputStream out;
    private int status = -1;
    private volatile IOException bodyFailure;
    private long bodyLimit = -1;
    private String noBodyRoute; // set: the route reads no body
    private final long arrived = System.nanoTime();

    /** A chunked body whose next chunk is declared larger than the body limit ({@link #limitBody}). */
    public static final class ChunkTooLargeException extends IOException {
        private static final long serialVersionUID = 1L;

        ChunkTooLargeException(long chunk, long limit) {
            super("a request body chunk of " + chunk + " bytes is declared, more than the " + limit
                    + " bytes a body may have");
        }
    }

    /** Jetty's parser's length of the chunk being read (private); null where it cannot be read. */
    private static final java.lang.reflect.Field CHUNK_LENGTH = chunkLengthField();

    private static java.lang.reflect.Field chunkLengthField() {
        try {
            java.lang.reflect.Field f = org.eclipse.jetty.http.HttpParser.class.getDeclaredField("_chunkLength");
            f.setAccessible(true);
            return f.getType() == long.class ? f : null;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null; // another Jetty: chunks are then bounded by the body limit and rates alone
        }
    }

    Exchange(Request request, Response response, Deadlines deadlines) {
        this.request = request;
        this.response = response;
        this.deadlines = deadlines;
    }

    /** When the request was handed to its thread ({@link System#nanoTime()}). */
    public long arrivedNanos() {
        return arrived;
    }

    /** The method, as sent ({@code GET}, {@code POST}, ...). */
    public String method() {
        return request.getMethod();
    }

    /** The decoded path, without the query. */
    public String path() {
        String p = request.getHttpURI().getDecodedPath();
        return p == null ? "/" : p;
    }

    /** The first value of a request header (names are case-insensitive), or null. */
    public String header(String name) {
        return request.getHeaders().get(name);
    }

    /** The request's {@code Content-Length}, or -1 when it is chunked or has no body. */
    public long declaredLength() {
        return request.getLength();
    }

    /** The client's address (the connection's remote end). */
    public InetSocketAddress remoteAddress() {
        return inet(request.getConnectionMetaData().getRemoteSocketAddress());
    }

    /** This server's end of the connection. */
    public InetSocketAddress localAddress() {
        return inet(request.getConnectionMetaData().getLocalSocketAddress());
    }

    /** The client's IP address: the key of its share of the node's slots. */
    public InetAddress clientAddress() {
        return remoteAddress().getAddress();
    }

    private static InetSocketAddress inet(SocketAddress a) {
        if (a instanceof InetSocketAddress i) {
            return i;
        }
        throw new IllegalStateException("not an IP connection: " + a);
    }

    /**
     * The request body. A body that arrives slower than the front's minimum rate is cut: the
     * connection is closed and a read fails.
     */
    public InputStream requestBody() {
        if (noBodyRoute != null) {
            throw new IllegalStateException(noBodyRoute + " is registered as reading no request body");
        }
        if (body == null) {
            body = new CountingInput(Content.Source.asInputStream(request), watch(), this);
        }
        return body;
    }

    /** Marks this request's route as reading no body ({@link Routes.Builder#withoutBody}). */
    void refuseBody(String route) {
        this.noBodyRoute = route;
    }

    private Deadlines.BodyWatch watch() {
        if (bodyWatch == null) {
            bodyWatch = deadlines.watchBody(request.getConnectionMetaData().getConnection(), declaredLength());
        }
        return bodyWatch;
    }

    /** How long a body is read before it may be evicted for a newcomer ({@link #bodyHolder()}). */
    static final long JUDGED_AFTER_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);

    /**
     * This request's body as a holder of a body slot ({@link FairSlots#acquire(InetAddress,
     * java.time.Duration, FairSlots.Evictable)}): judged after it has been read for 1 s, by its bytes
     * per second since; evicting it closes the connection (the reader fails, the client gets no answer).
     */
    public FairSlots.Evictable bodyHolder() {
        Deadlines.BodyWatch w = watch();
        return new FairSlots.Evictable() {
            @Override
            public boolean judged(long now) {
                return w.olderThan(now, JUDGED_AFTER_NANOS);
            }

            @Override
            public double rate(long now) {
                return w.rate(now);
            }

            @Override
            public void evict() {
                w.cut();
            }
        };
    }

    /**
     * Refuses a chunked body as soon as a chunk larger than {@code limit} is declared: a read then throws
     * {@link ChunkTooLargeException} (answer 413 and close), rather than reading up to the limit first.
     */
    public void limitBody(long limit) {
        this.bodyLimit = limit;
    }

    /** The declared length of the chunk being read, or -1 when not chunked or unknown. */
    private long declaredChunk() {
        if (CHUNK_LENGTH == null || declaredLength() >= 0
                || !(request.getConnectionMetaData().getConnection()
                        instanceof org.eclipse.jetty.server.internal.HttpConnection c)) {
            return -1;
        }
        try {
            org.eclipse.jetty.http.HttpParser p = c.getParser();
            return p.isChunking() ? CHUNK_LENGTH.getLong(p) : -1;
        } catch (IllegalAccessException | RuntimeException e) {
            return -1;
        }
    }

    private void checkChunk() throws ChunkTooLargeException {
        if (bodyLimit >= 0) {
            long chunk = declaredChunk();
            if (chunk > bodyLimit) {
                throw new ChunkTooLargeException(chunk, bodyLimit);
            }
        }
    }

    /**
     * Answers at once, before the body is read (a body declared over a limit): sends {@code json} with
     * {@code status} now, then reads the declared body away when it is at most {@code drainLimit} bytes,
     * so that a client that sends its whole body before reading still gets the answer and the connection
     * stays usable; a larger one is not read and the connection is closed after the answer. The body
     * rates and deadlines apply to the reading away.
     */
    public void answerBeforeBody(int status, byte[] json, long drainLimit) throws IOException {
        boolean drain = declaredLength() >= 0 && declaredLength() <= drainLimit;
        if (!drain) {
            setHeader("Connection", "close");
        }
        setHeader("Content-Type", "application/json");
        sendResponseHeaders(status, json.length == 0 ? -1 : json.length);
        out.write(json);
        out.flush(); // the answer leaves now
        if (drain) {
            try (InputStream in = requestBody()) {
                in.transferTo(OutputStream.nullOutputStream());
            } catch (IOException e) {
                // cut by a deadline or gone: the answer was sent
            }
        }
    }

    /** Sets a response header (before {@link #sendResponseHeaders}). */
    public void setHeader(String name, String value) {
        response.getHeaders().put(name, value);
    }

    /**
     * Starts the response.
     *
     * @param status the status code
     * @param length the body's length; 0: unknown (sent chunked, the headers leave now); -1: no body
     */
    public void sendResponseHeaders(int status, long length) throws IOException {
        if (this.status != -1) {
            throw new IOException("the response was already started (" + this.status + ")");
        }
        this.status = status;
        response.setStatus(status);
        if (length > 0) {
            response.getHeaders().put(HttpHeader.CONTENT_LENGTH, length);
        } else if (length < 0) {
            response.getHeaders().put(HttpHeader.CONTENT_LENGTH, 0L);
        }
        ResponseStream rs = new ResponseStream(response);
        out = rs;
        if (length == 0) {
            rs.sendHeaders(); // the headers go now: a stream's client sees them before its first event
        }
    }

    /** The response body, after {@link #sendResponseHeaders}; {@code flush} sends what was written. */
    public OutputStream responseBody() {
        if (out == null) {
            throw new IllegalStateException("sendResponseHeaders first");
        }
        return out;
    }

    /** The status sent, or -1 while the response has not been started. */
    public int responseCode() {
        return status;
    }

    Request request() {
        return request;
    }

    Response response() {
        return response;
    }

    /** Why reading the body failed (bad framing, a cut connection), or null. */
    IOException bodyFailure() {
        return bodyFailure;
    }

    /** Ends the response (the last bytes leave); true when one was started and ended cleanly. */
    boolean finish() throws IOException {
        try {
            if (out != null) {
                out.close();
                return true;
            }
            return false;
        } finally {
            if (bodyWatch != null) {
                bodyWatch.close();
            }
        }
    }

    /**
     * The response body: what is written collects in one buffer, and each {@code flush} (a streamed
     * event) or the end is one blocking write through Jetty, the last one ending the response (a small
     * answer leaves with its headers in a single write).
     */
    private static final class ResponseStream extends java.io.OutputStream {
        private final Response response;
        private final byte[] buf = new byte[RESPONSE_BUFFER];
        private int n;
        private boolean closed;

        ResponseStream(Response response) {
            this.response = response;
        }

        void sendHeaders() throws IOException {
            Content.Sink.write(response, false, ByteBuffer.allocate(0));
        }

        @Override
        public void write(int b) throws IOException {
            if (n == buf.length) {
                drain(false);
            }
            buf[n++] = (byte) b;
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            java.util.Objects.checkFromIndexSize(off, len, b.length);
            if (closed) {
                throw new IOException("the response was ended");
            }
            if (len >= buf.length) {
                drain(false);
                Content.Sink.write(response, false, ByteBuffer.wrap(b, off, len).slice());
                return;
            }
            if (len > buf.length - n) {
                drain(false);
            }
            System.arraycopy(b, off, buf, n, len);
            n += len;
        }

        @Override
        public void flush() throws IOException {
            if (n > 0 && !closed) {
                drain(false);
            }
        }

        @Override
        public void close() throws IOException {
            if (!closed) {
                closed = true;
                drain(true);
            }
        }

        private void drain(boolean last) throws IOException {
            // Jetty may keep the buffer until the write completes, which the blocking write waits for
            ByteBuffer b = ByteBuffer.wrap(buf, 0, n).slice();
            n = 0;
            Content.Sink.write(response, last, b);
        }
    }

    /** Counts the bytes read for the rate check; the watch ends at the body's end. */
    private static final class CountingInput extends InputStream {
        private final InputStream in;
        private final Deadlines.BodyWatch watch;
        private final Exchange ex;

        CountingInput(InputStream in, Deadlines.BodyWatch watch, Exchange ex) {
            this.in = Objects.requireNonNull(in);
            this.watch = watch;
            this.ex = ex;
        }

        private IOException failed(IOException e) {
            ex.bodyFailure = e;
            watch.close();
            return e;
        }

        @Override
        public int read() throws IOException {
            watch.reading();
            int b;
            try {
                b = in.read();
            } catch (IOException e) {
                throw failed(e);
            }
            if (b < 0) {
                watch.close();
            } else {
                watch.got(1);
                ex.checkChunk();
            }
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            watch.reading();
            int n;
            try {
                n = in.read(b, off, len);
            } catch (IOException e) {
                throw failed(e);
            }
            if (n < 0) {
                watch.close();
            } else {
                watch.got(n);
                ex.checkChunk();
            }
            return n;
        }

        @Override
        public int available() throws IOException {
            return in.available();
        }

        @Override
        public void close() throws IOException {
            watch.close();
            in.close();
        }
    }
}
