package io.mooncake4j.proxy;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadFactory;

/**
 * A small blocking HTTP/1.1 client for the proxy's calls to P and D and for the workload client: plain
 * {@code http://} only, one request per connection at a time, idle connections kept per upstream
 * ({@code host:port}) for reuse, bodies framed by {@code Content-Length}, {@code chunked} or the end of the
 * connection. It replaces the JDK's {@code java.net.http.HttpClient} on these paths, whose asynchronous
 * machinery cost ~10 ms of CPU per proxied request (docs/performance.md, "Serving through serve + proxy").
 * It was kept, not moved to Jetty 12's client (the library the nodes' server is on), by a same-run
 * measurement ({@code UpstreamClientBench}, three runs of 8 alternating rounds on a loaded 2-core machine):
 * Jetty's client took 1.8–2.0× the CPU per call for a JSON answer (about 0.1 ms more a call; the proxy
 * makes two per request) and 1.33–1.36× for a streamed one, at 0.52–0.81× and 0.74–0.97× the throughput
 * (docs/performance.md, "The nodes' HTTP layer on Jetty 12").
 *
 * <p>What a peer can make it spend is bounded: the status line and each header or chunk-size line
 * ({@link Limits#maxLineBytes()}), the whole header block ({@link Limits#maxHeaderBytes()}) and the number
 * of header fields ({@link Limits#maxHeaderFields()}), idle connections kept per upstream
 * ({@link Limits#maxIdlePerUpstream()}) and how long one is kept ({@link Limits#idleTimeout()}). Body size
 * is the caller's to bound (it reads the {@link Response#body()} stream). A malformed answer is an
 * {@link IOException} naming what was wrong; the connection is then closed, never reused.
 *
 * <p>Timeouts: {@link Limits#connectTimeout()} (then {@link HttpConnectTimeoutException}); the request's
 * timeout runs until the response's headers are in ({@link HttpTimeoutException}), and after that bounds
 * each read of the body (a body that stalls longer fails the read with {@link HttpTimeoutException}).
 *
 * <p>A {@code GET} or {@code HEAD} sent on a reused connection that the upstream had already closed (no
 * byte of an answer came back) is sent once more on a new connection, as other HTTP/1.1 clients do; a
 * {@code POST} is never sent twice (RFC 9110 section 9.2.2: the upstream may have acted on it), its failure is
 * the caller's, as is any other.
 *
 * <p><b>Threads and ownership:</b> {@link #send} blocks the calling thread (meant for virtual threads);
 * {@link #sendAsync} runs it on a new thread from the factory given at construction. A {@link Response}
 * belongs to its caller, who must read its body to the end or close it: a body read to its end returns
 * the connection to the pool, a body closed early closes the connection. Thread-safe.
 */
final class Http1Client implements AutoCloseable {

    /**
     * Bounds and timeouts.
     *
     * @param connectTimeout     TCP connect limit
     * @param idleTimeout        an idle pooled connection older than this is closed, not reused (keep it below
     *                           the upstreams' own keep-alive timeout: uvicorn's is 5 s)
     * @param maxIdlePerUpstream idle connections kept per {@code host:port}; more are closed when released
     * @param maxLineBytes       longest status, header or chunk-size line
     * @param maxHeaderBytes     longest header block (status line, fields, trailers)
     * @param maxHeaderFields    most header fields in one answer
     */
    record Limits(Duration connectTimeout, Duration idleTimeout, int maxIdlePerUpstream, int maxLineBytes,
            int maxHeaderBytes, int maxHeaderFields) {

        Limits {
            Objects.requireNonNull(connectTimeout, "connectTimeout");
            Objects.requireNonNull(idleTimeout, "idleTimeout");
            if (maxIdlePerUpstream < 0 || maxLineBytes < 64 || maxHeaderBytes < maxLineBytes || maxHeaderFields < 1) {
                throw new IllegalArgumentException("bad HTTP client limits: " + maxIdlePerUpstream + ", "
                        + maxLineBytes + ", " + maxHeaderBytes + ", " + maxHeaderFields);
            }
        }

        /** 8 KiB lines, 64 KiB of headers, 100 fields, 64 idle connections per upstream kept up to 2 s. */
        static Limits defaults(Duration connectTimeout) {
            return new Limits(connectTimeout, Duration.ofSeconds(2), 64, 8 << 10, 64 << 10, 100);
        }
    }

    /**
     * One request.
     *
     * @param method  {@code GET}, {@code POST}, ...
     * @param uri     an {@code http://host:port/path?query} address
     * @param headers extra header fields (not {@code Host}, {@code Content-Length}, {@code Connection})
     * @param body    the body, or null for none
     * @param timeout limit until the answer's headers are in, and on each later read of its body
     */
    record Request(String method, URI uri, Map<String, String> headers, byte[] body, Duration timeout) {

        Request {
            Objects.requireNonNull(method, "method");
            Objects.requireNonNull(uri, "uri");
            Objects.requireNonNull(timeout, "timeout");
            headers = headers == null ? Map.of() : Map.copyOf(headers);
            if (!"http".equalsIgnoreCase(uri.getScheme()) || uri.getHost() == null) {
                throw new IllegalArgumentException("only http://host[:port]/... addresses are supported, got " + uri);
            }
        }

        static Request get(URI uri, Duration timeout) {
            return new Request("GET", uri, Map.of(), null, timeout);
        }

        static Request post(URI uri, Map<String, String> headers, byte[] body, Duration timeout) {
            return new Request("POST", uri, headers, body, timeout);
        }
    }

    /** An answer: status and headers read, body not yet. Close it (or read the body to its end). */
    static final class Response implements Closeable {
        private final int status;
        private final Map<String, List<String>> headers;
        private final InputStream body;

        Response(int status, Map<String, List<String>> headers, InputStream body) {
            this.status = status;
            this.headers = headers;
            this.body = body;
        }

        int statusCode() {
            return status;
        }

        /** The first value of a header field, by case-insensitive name. */
        Optional<String> header(String name) {
            List<String> v = headers.get(name.toLowerCase(Locale.ROOT));
            return v == null || v.isEmpty() ? Optional.empty() : Optional.of(v.getFirst());
        }

        /** The body; at its end the connection goes back to the pool. */
        InputStream body() {
            return body;
        }

        /** The whole body as UTF-8, at most {@code limit} bytes (more is an {@link IOException}). */
        String bodyString(int limit) throws IOException {
            try (InputStream in = body) {
                byte[] b = in.readNBytes(limit);
                if (in.read() >= 0) {
                    throw new IOException("answer body exceeds " + limit + " bytes");
                }
                return new String(b, StandardCharsets.UTF_8);
            }
        }

        @Override
        public void close() throws IOException {
            body.close();
        }
    }

    private final Limits limits;
    private final ThreadFactory threads;
    private final Map<String, ArrayDeque<Http1Conn>> idle = new HashMap<>();
    private volatile boolean closed;

    /**
     * @param threads makes the thread of each {@link #sendAsync} call (e.g. a named virtual-thread factory)
     */
    Http1Client(Limits limits, ThreadFactory threads) {
        this.limits = Objects.requireNonNull(limits, "limits");
        this.threads = Objects.requireNonNull(threads, "threads");
    }

    /** Idle connections pooled for {@code host:port} now (for tests). */
    int idleConnections(String hostPort) {
        synchronized (idle) {
            ArrayDeque<Http1Conn> q = idle.get(hostPort);
            return q == null ? 0 : q.size();
        }
    }

    /**
     * Sends {@code r} on a new thread. Cancelling the future ({@link CompletableFuture#cancel}) closes the
     * connection, which fails the call (or the body read) in progress; an answer that arrives after the
     * cancel is closed.
     */
    CompletableFuture<Response> sendAsync(Request r) {
        CompletableFuture<Response> f = new CompletableFuture<>();
        Call call = new Call();
        f.whenComplete((x, e) -> {
            if (e instanceof CancellationException) {
                call.abort();
            }
        });
        Thread t = threads.newThread(() -> {
            try {
                Response x = send(r, call);
                if (!f.complete(x)) {
                    closeQuietly(x);
                }
            } catch (IOException | RuntimeException e) {
                f.completeExceptionally(e);
            }
        });
        t.start();
        return f;
    }

    /** Sends {@code r} and reads the answer's status and headers; the body is left to the caller. */
    Response send(Request r) throws IOException {
        return send(r, new Call());
    }

    /** What a cancel must close: the connection a call is using now. */
    private static final class Call {
        private Http1Conn conn;
        private boolean aborted;

        synchronized boolean attach(Http1Conn c) {
            if (aborted) {
                return false;
            }
            conn = c;
            return true;
        }

        void abort() {
            Http1Conn c;
            synchronized (this) {
                aborted = true;
                c = conn;
            }
            if (c != null) {
                c.close();
            }
        }

        synchronized boolean aborted() {
            return aborted;
        }
    }

    private Response send(Request r, Call call) throws IOException {
        if (closed) {
            throw new IOException("the HTTP client is closed");
        }
        String host = r.uri().getHost();
        int port = r.uri().getPort() < 0 ? 80 : r.uri().getPort();
        String key = host + ":" + port;
        long deadline = System.nanoTime() + r.timeout().toNanos();
        byte[] head = head(r, key);
        boolean idempotent = r.method().equals("GET") || r.method().equals("HEAD");
        for (int attempt = 0; ; attempt++) {
            Http1Conn c = attempt == 0 ? pooled(key) : null;
            boolean reused = c != null;
            if (c == null) {
                c = connect(host, port, key);
            }
            if (!call.attach(c)) {
                c.close();
                throw new CancellationException("request cancelled");
            }
            try {
                c.out.write(head);
                if (r.body() != null) {
                    c.out.write(r.body());
                }
                c.out.flush();
                return readResponse(c, r.method(), deadline, r.timeout());
            } catch (StaleConnection e) {
                c.close();
                if (call.aborted()) {
                    throw new CancellationException("request cancelled");
                }
                if (!reused || !idempotent) {
                    throw new IOException("connection closed by the upstream before an answer"
                            + (reused ? " (a kept-alive connection; not resent)" : ""), e);
                }
                // the upstream closed an idle pooled connection: once more on a fresh one
            } catch (IOException | RuntimeException e) {
                c.close();
                if (call.aborted()) {
                    throw new CancellationException("request cancelled");
                }
                if (reused && idempotent && !c.answered && e instanceof java.net.SocketException) {
                    continue; // reset on a pooled connection before any answer: same as stale
                }
                throw e;
            }
        }
    }

    private static byte[] head(Request r, String hostPort) {
        String path = r.uri().getRawPath();
        if (path == null || path.isEmpty()) {
            path = "/";
        }
        if (r.uri().getRawQuery() != null) {
            path += "?" + r.uri().getRawQuery();
        }
        StringBuilder sb = new StringBuilder(256);
        sb.append(r.method()).append(' ').append(path).append(" HTTP/1.1\r\nHost: ").append(hostPort).append("\r\n");
        for (Map.Entry<String, String> h : r.headers().entrySet()) {
            String k = h.getKey();
            if (k.equalsIgnoreCase("host") || k.equalsIgnoreCase("content-length") || k.equalsIgnoreCase("connection")
                    || k.equalsIgnoreCase("transfer-encoding")) {
                throw new IllegalArgumentException("header " + k + " is set by the client itself");
            }
            if (!token(k) || h.getValue().indexOf('\r') >= 0 || h.getValue().indexOf('\n') >= 0) {
                throw new IllegalArgumentException("bad header field " + k);
            }
            sb.append(k).append(": ").append(h.getValue()).append("\r\n");
        }
        if (r.body() != null) {
            sb.append("Content-Length: ").append(r.body().length).append("\r\n");
        }
        sb.append("\r\n");
        return sb.toString().getBytes(StandardCharsets.ISO_8859_1);
    }

    private static boolean token(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch <= ' ' || ch >= 127 || "()<>@,;:\\\"/[]?={}".indexOf(ch) >= 0) {
                return false;
            }
        }
        return true;
    }

    private Http1Conn connect(String host, int port, String key) throws IOException {
        Socket s = new Socket();
        try {
            s.setTcpNoDelay(true);
            s.connect(new InetSocketAddress(host, port), (int) Math.min(Integer.MAX_VALUE,
                    Math.max(1, limits.connectTimeout().toMillis())));
        } catch (SocketTimeoutException e) {
            closeQuietly(s);
            HttpConnectTimeoutException t = new HttpConnectTimeoutException("connect to " + key + " timed out");
            t.initCause(e);
            throw t;
        } catch (IOException | RuntimeException e) {
            closeQuietly(s);
            throw e;
        }
        return new Http1Conn(s, key);
    }

    private Http1Conn pooled(String key) {
        long now = System.nanoTime();
        List<Http1Conn> expired = new ArrayList<>();
        Http1Conn found = null;
        synchronized (idle) {
            ArrayDeque<Http1Conn> q = idle.get(key);
            while (q != null && !q.isEmpty()) {
                Http1Conn c = q.pollLast(); // the most recently used first
                if (now - c.idleSince < limits.idleTimeout().toNanos()) {
                    found = c;
                    break;
                }
                expired.add(c);
            }
        }
        expired.forEach(Http1Conn::close);
        if (found != null) {
            found.answered = false;
        }
        return found;
    }

    /** Puts a connection whose answer was read whole back in the pool, or closes it. */
    private void release(Http1Conn c) {
        if (closed || limits.maxIdlePerUpstream() == 0) {
            c.close();
            return;
        }
        c.idleSince = System.nanoTime();
        boolean kept = false;
        synchronized (idle) {
            ArrayDeque<Http1Conn> q = idle.computeIfAbsent(c.key, k -> new ArrayDeque<>());
            if (q.size() < limits.maxIdlePerUpstream()) {
                q.addLast(c);
                kept = true;
            }
        }
        if (!kept) {
            c.close();
        }
    }

    /** Closes every idle connection; later calls fail. Answers being read keep their connections until closed. */
    @Override
    public void close() {
        closed = true;
        List<Http1Conn> all = new ArrayList<>();
        synchronized (idle) {
            idle.values().forEach(all::addAll);
            idle.clear();
        }
        all.forEach(Http1Conn::close);
    }

    // ---------------------------------------------------------------- parsing

    /** The upstream closed the connection before the first byte of an answer. */
    private static final class StaleConnection extends IOException {
        private static final long serialVersionUID = 1L;

        StaleConnection() {
            super("connection closed before an answer");
        }
    }

    private Response readResponse(Http1Conn c, String method, long deadline, Duration bodyTimeout) throws IOException {
        while (true) {
            setTimeout(c, deadline);
            String status;
            try {
                status = c.readLine(limits.maxLineBytes(), true);
            } catch (SocketTimeoutException e) {
                throw timeout(c, e);
            }
            if (status == null) {
                throw new StaleConnection();
            }
            c.headerBytes = status.length() + 2;
            // HTTP/1.x SP 3DIGIT [SP reason]
            if (!status.startsWith("HTTP/1.") || status.length() < 12 || status.charAt(8) != ' '
                    || (status.length() > 12 && status.charAt(12) != ' ')) {
                throw new IOException("malformed status line from " + c.key + ": " + printable(status));
            }
            int code;
            try {
                code = Integer.parseInt(status.substring(9, 12));
            } catch (NumberFormatException e) {
                throw new IOException("malformed status code from " + c.key + ": " + printable(status));
            }
            if (code < 100 || code > 599) {
                throw new IOException("status " + code + " out of range from " + c.key);
            }
            boolean http10 = status.charAt(7) == '0';
            Map<String, List<String>> headers;
            try {
                headers = readFields(c, deadline);
            } catch (SocketTimeoutException e) {
                throw timeout(c, e);
            }
            if (code / 100 == 1) {
                if (code == 101) {
                    throw new IOException("unexpected 101 Switching Protocols from " + c.key);
                }
                continue; // 100 Continue, 103 Early Hints: the answer follows
            }
            c.socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, bodyTimeout.toMillis())));
            boolean keepAlive = !http10 && !hasToken(headers, "connection", "close");
            InputStream body;
            List<String> te = headers.get("transfer-encoding");
            List<String> cl = headers.get("content-length");
            if (method.equals("HEAD") || code == 204 || code == 304) {
                body = new FixedBody(c, 0, keepAlive);
            } else if (te != null) {
                if (!(te.size() == 1 && te.getFirst().trim().equalsIgnoreCase("chunked"))) {
                    throw new IOException("unsupported Transfer-Encoding from " + c.key + ": " + te);
                }
                if (cl != null) {
                    throw new IOException("both Transfer-Encoding and Content-Length from " + c.key);
                }
                body = new ChunkedBody(c, keepAlive);
            } else if (cl != null) {
                long n = -1;
                for (String v : cl) {
                    for (String part : v.split(",", -1)) {
                        long x = parseLength(part.trim(), c.key);
                        if (n >= 0 && x != n) {
                            throw new IOException("conflicting Content-Length from " + c.key + ": " + cl);
                        }
                        n = x;
                    }
                }
                body = new FixedBody(c, n, keepAlive);
            } else {
                body = new UntilCloseBody(c);
            }
            return new Response(code, headers, body);
        }
    }

    private static long parseLength(String s, String key) throws IOException {
        if (s.isEmpty() || s.length() > 18) {
            throw new IOException("bad Content-Length from " + key + ": " + printable(s));
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) < '0' || s.charAt(i) > '9') {
                throw new IOException("bad Content-Length from " + key + ": " + printable(s));
            }
        }
        return Long.parseLong(s);
    }

    private Map<String, List<String>> readFields(Http1Conn c, long deadline) throws IOException {
        Map<String, List<String>> headers = new LinkedHashMap<>();
        int fields = 0;
        while (true) {
            if (deadline != 0) {
                setTimeout(c, deadline);
            }
            String line = c.readLine(limits.maxLineBytes(), false);
            if (line == null) {
                throw new EOFException("connection closed inside the header block from " + c.key);
            }
            c.headerBytes += line.length() + 2;
            if (c.headerBytes > limits.maxHeaderBytes()) {
                throw new IOException("header block from " + c.key + " exceeds " + limits.maxHeaderBytes() + " bytes");
            }
            if (line.isEmpty()) {
                return headers;
            }
            if (++fields > limits.maxHeaderFields()) {
                throw new IOException("more than " + limits.maxHeaderFields() + " header fields from " + c.key);
            }
            int colon = line.indexOf(':');
            if (colon <= 0 || !token(line.substring(0, colon))) {
                throw new IOException("malformed header line from " + c.key + ": " + printable(line));
            }
            headers.computeIfAbsent(line.substring(0, colon).toLowerCase(Locale.ROOT), k -> new ArrayList<>(1))
                    .add(line.substring(colon + 1).trim());
        }
    }

    private static boolean hasToken(Map<String, List<String>> headers, String name, String token) {
        List<String> v = headers.get(name);
        if (v == null) {
            return false;
        }
        for (String s : v) {
            for (String t : s.split(",")) {
                if (t.trim().equalsIgnoreCase(token)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static void setTimeout(Http1Conn c, long deadline) throws IOException {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            throw new HttpTimeoutException("no answer from " + c.key + " within the request timeout");
        }
        c.socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, Math.max(1, left / 1_000_000)));
    }

    private static HttpTimeoutException timeout(Http1Conn c, SocketTimeoutException e) {
        HttpTimeoutException t = new HttpTimeoutException("no answer from " + c.key + " within the request timeout");
        t.initCause(e);
        return t;
    }

    private static String printable(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length() && sb.length() < 120; i++) {
            char ch = s.charAt(i);
            sb.append(ch >= ' ' && ch < 127 ? ch : '?');
        }
        return "'" + sb + (s.length() > 120 ? "...'" : "'");
    }

    private static void closeQuietly(Closeable c) {
        try {
            c.close();
        } catch (IOException ignored) {
            // closing to abort or after a failure: nothing more to say
        }
    }

    /** Base of the body streams: a read that times out becomes an {@link HttpTimeoutException}. */
    private abstract class Body extends InputStream {
        final Http1Conn c;
        boolean done;
        boolean closed;

        Body(Http1Conn c) {
            this.c = c;
        }

        @Override
        public int read() throws IOException {
            byte[] one = new byte[1];
            int n = read(one, 0, 1);
            return n < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            Objects.checkFromIndexSize(off, len, b.length);
            if (closed) {
                throw new IOException("body stream closed");
            }
            if (done) {
                return -1;
            }
            if (len == 0) {
                return 0;
            }
            try {
                return readBody(b, off, len);
            } catch (SocketTimeoutException e) {
                fail();
                HttpTimeoutException t = new HttpTimeoutException("the answer's body from " + c.key + " stalled");
                t.initCause(e);
                throw t;
            } catch (IOException | RuntimeException e) {
                fail();
                throw e;
            }
        }

        abstract int readBody(byte[] b, int off, int len) throws IOException;

        /** The body's end was read: the connection goes back to the pool when {@code keepAlive}. */
        void finished(boolean keepAlive) {
            done = true;
            if (keepAlive) {
                release(c);
            } else {
                c.close();
            }
        }

        private void fail() {
            done = true;
            c.close();
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                if (!done) {
                    done = true;
                    c.close(); // read early: the rest of the answer is not wanted
                }
            }
        }
    }

    private final class FixedBody extends Body {
        private long left;
        private final boolean keepAlive;

        FixedBody(Http1Conn c, long length, boolean keepAlive) {
            super(c);
            this.left = length;
            this.keepAlive = keepAlive;
            if (length == 0) {
                finished(keepAlive);
            }
        }

        @Override
        int readBody(byte[] b, int off, int len) throws IOException {
            int n = c.in.read(b, off, (int) Math.min(len, left));
            if (n < 0) {
                throw new EOFException("connection closed with " + left + " bytes of the body from " + c.key
                        + " still to come");
            }
            left -= n;
            if (left == 0) {
                finished(keepAlive);
            }
            return n;
        }

        @Override
        public int available() throws IOException {
            return done || closed ? 0 : (int) Math.min(left, c.in.available());
        }
    }

    private final class UntilCloseBody extends Body {
        UntilCloseBody(Http1Conn c) {
            super(c);
        }

        @Override
        int readBody(byte[] b, int off, int len) throws IOException {
            int n = c.in.read(b, off, len);
            if (n < 0) {
                finished(false);
            }
            return n;
        }
    }

    private final class ChunkedBody extends Body {
        private long chunkLeft; // bytes left of the current chunk; 0: a size line comes next
        private boolean first = true;
        private final boolean keepAlive;

        ChunkedBody(Http1Conn c, boolean keepAlive) {
            super(c);
            this.keepAlive = keepAlive;
        }

        @Override
        int readBody(byte[] b, int off, int len) throws IOException {
            if (chunkLeft == 0) {
                if (!first) {
                    String end = c.readLine(limits.maxLineBytes(), false);
                    if (end == null || !end.isEmpty()) {
                        throw new IOException("chunk from " + c.key + " not followed by CRLF");
                    }
                }
                first = false;
                String line = c.readLine(limits.maxLineBytes(), false);
                if (line == null) {
                    throw new EOFException("connection closed before the last chunk from " + c.key);
                }
                int semi = line.indexOf(';'); // chunk extensions are ignored
                String hex = (semi >= 0 ? line.substring(0, semi) : line).trim();
                if (hex.isEmpty() || hex.length() > 15) {
                    throw new IOException("bad chunk size from " + c.key + ": " + printable(line));
                }
                long size = 0;
                for (int i = 0; i < hex.length(); i++) {
                    int d = Character.digit(hex.charAt(i), 16);
                    if (d < 0) {
                        throw new IOException("bad chunk size from " + c.key + ": " + printable(line));
                    }
                    size = size * 16 + d;
                }
                if (size == 0) {
                    c.headerBytes = 0;
                    readFields(c, 0); // trailers, bounded like headers
                    finished(keepAlive);
                    return -1;
                }
                chunkLeft = size;
            }
            int n = c.in.read(b, off, (int) Math.min(len, chunkLeft));
            if (n < 0) {
                throw new EOFException("connection closed inside a chunk from " + c.key);
            }
            chunkLeft -= n;
            return n;
        }
    }
}
