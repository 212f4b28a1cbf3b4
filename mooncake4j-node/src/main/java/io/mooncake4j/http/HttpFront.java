package io.mooncake4j.http;

import io.mooncake4j.internal.json.Json;

import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.EofException;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.ErrorHandler;
import org.eclipse.jetty.util.Callback;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The HTTP server of a node ({@code serve}, {@code proxy}): Jetty's HTTP/1.1 connector (its parser
 * refuses malformed framing with 400 and a close, its header limit answers 431) with the
 * {@link HttpLimits} deadlines ({@link Deadlines}) and an idle timeout, and each request handed to a
 * blocking {@link Handler} on a virtual thread of its own, {@code <name>-N}. Errors Jetty answers
 * itself (bad framing, headers too large) carry vLLM's JSON error shape, as the routes' own do.
 *
 * <p>Ownership: the front owns its Jetty server, its few platform threads (one acceptor and one
 * selector, in a pool named {@code <name>io}) and the sweeper; {@link #close()} stops accepting,
 * closes the connections, interrupts the requests still running and waits for nothing.
 */
public final class HttpFront implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(HttpFront.class);

    /**
     * A handler of requests: runs on a virtual thread per request and may block; the response is ended
     * after it. The front's own handler is a {@link Routes} table; a route without a body is one of these.
     */
    @FunctionalInterface
    public interface Handler {
        void handle(Exchange exchange) throws IOException;
    }

    private final Server server;
    private final Deadlines deadlines;
    private final ExecutorService requests;
    private final int port; // kept: Jetty forgets it when stopped
    private final org.eclipse.jetty.server.NetworkConnectionLimit cap;

    private HttpFront(Server server, ServerConnector connector, Deadlines deadlines, ExecutorService requests,
            org.eclipse.jetty.server.NetworkConnectionLimit cap) {
        this.server = server;
        this.cap = cap;
        this.port = connector.getLocalPort();
        this.deadlines = deadlines;
        this.requests = requests;
    }

    /**
     * Binds {@code host:port} and serves.
     *
     * @param name    thread-name prefix ({@code mooncake-serve-http-})
     * @param backlog the listen queue
     * @param routes  the route table: every request goes through it, so that every route is protected
     *                (body slots and limits) as {@link Routes} describes
     * @throws IOException the address cannot be bound
     */
    public static HttpFront start(String name, String host, int port, int backlog, HttpLimits limits, Routes routes)
            throws IOException {
        Objects.requireNonNull(limits, "limits");
        Handler handler = Objects.requireNonNull(routes, "routes");
        QueuedThreadPool io = new QueuedThreadPool(8, 2);
        io.setName(name + "io");
        io.setDaemon(true);
        io.setReservedThreads(0);
        Server server = new Server(io);
        HttpConfiguration http = new HttpConfiguration();
        http.setRequestHeaderSize(limits.maxHeaderBytes());
        http.setSendServerVersion(false);
        http.setSendXPoweredBy(false);
        ServerConnector connector = new ServerConnector(server, 1, 1, new HttpConnectionFactory(http));
        connector.setHost(host);
        connector.setPort(port);
        connector.setAcceptQueueSize(backlog);
        connector.setIdleTimeout(limits.idleTimeout().toMillis());
        Deadlines deadlines = new Deadlines(limits, name);
        connector.addEventListener(deadlines);
        server.addConnector(connector);
        // at the cap the connector stops accepting until a connection closes (the rest wait in the backlog)
        org.eclipse.jetty.server.NetworkConnectionLimit cap =
                new org.eclipse.jetty.server.NetworkConnectionLimit(limits.maxConnections(), connector);
        server.addBean(cap);
        ExecutorService requests = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name(name, 0).factory());
        server.setHandler(new org.eclipse.jetty.server.Handler.Abstract.NonBlocking() {
            @Override
            public boolean handle(Request request, Response response, Callback callback) {
                requests.execute(() -> run(handler, new Exchange(request, response, deadlines), callback));
                return true;
            }
        });
        server.setErrorHandler(HttpFront::jsonError);
        try {
            server.start();
        } catch (Exception e) {
            deadlines.close();
            requests.close();
            try {
                server.stop();
            } catch (Exception stop) {
                e.addSuppressed(stop);
            }
            throw new IOException(e.getMessage() == null ? e.toString() : e.getMessage(), e);
        }
        return new HttpFront(server, connector, deadlines, requests, cap);
    }

    private static void run(Handler handler, Exchange ex, Callback callback) {
        Throwable failure = null;
        try {
            handler.handle(ex);
        } catch (IOException | RuntimeException e) {
            failure = e;
            LOG.debug("HTTP request {} {} failed", ex.method(), ex.path(), e);
        }
        boolean answered;
        try {
            answered = ex.finish();
        } catch (IOException | RuntimeException e) {
            callback.failed(e); // the client is gone (or the answer could not be ended): nothing more to send
            return;
        }
        if (answered) {
            if (failure == null) {
                callback.succeeded();
            } else {
                // a half-sent answer: the connection is closed rather than left with it
                callback.failed(new EofException("the handler failed after answering: " + failure));
            }
            return;
        }
        if (!ex.request().getConnectionMetaData().getConnection().getEndPoint().isOpen()) {
            // cut by a deadline, or the client went away: nobody to answer
            callback.failed(new EofException("the connection closed before an answer"));
        } else if (ex.bodyFailure() != null) {
            // the parser refused the body's framing (a bad chunk size, ...)
            Response.writeError(ex.request(), ex.response(), callback, 400,
                    "the request body could not be read: " + ex.bodyFailure().getMessage());
        } else {
            Response.writeError(ex.request(), ex.response(), callback, 500,
                    "the server sent no answer" + (failure == null ? "" : ": " + failure));
        }
    }

    /** The bound port (also after {@link #close()}). */
    public int port() {
        return port;
    }

    /** Connections closed because a request header did not complete within the header timeout. */
    public long headerTimeouts() {
        return deadlines.headerTimeouts();
    }

    /** Connections closed because a request body delivered less than the minimum rate in a recent window. */
    public long slowBodies() {
        return deadlines.slowBodies();
    }

    /** Connections open now ({@link HttpLimits#maxConnections()} at most). */
    public int openConnections() {
        return cap.getNetworkConnectionCount();
    }

    /** Connections closed because a request body was not complete by its overall deadline. */
    public long lateBodies() {
        return deadlines.lateBodies();
    }

    /** Stops accepting, closes every connection and interrupts the requests still running. Idempotent. */
    @Override
    public void close() {
        try {
            server.stop();
        } catch (Exception e) {
            LOG.warn("stopping the HTTP server on port {} failed", port(), e);
        }
        deadlines.close();
        // not close(), which would wait: a proxy's request may be blocked on a node for minutes; an
        // interrupted handler answers 503 on a connection that is already closed
        requests.shutdownNow();
    }

    /** Jetty's own error answers (bad framing, 431, ...) in the JSON error shape of the routes. */
    private static boolean jsonError(Request request, Response response, Callback callback) {
        int status = response.getStatus();
        Object message = request.getAttribute(ErrorHandler.ERROR_MESSAGE);
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("message", message != null ? message.toString()
                : String.format(Locale.ROOT, "HTTP %d", status));
        e.put("type", switch (status) {
            case 400 -> "BadRequestError";
            case 404 -> "NotFoundError";
            case 408 -> "RequestTimeoutError";
            case 413 -> "RequestEntityTooLarge";
            case 431 -> "RequestHeaderFieldsTooLarge";
            default -> status >= 500 ? "InternalServerError" : "BadRequestError";
        });
        e.put("param", null);
        e.put("code", status);
        byte[] b = Json.write(Map.of("error", e)).getBytes(StandardCharsets.UTF_8);
        response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/json");
        response.getHeaders().put(HttpHeader.CONTENT_LENGTH, (long) b.length);
        response.write(true, ByteBuffer.wrap(b), callback);
        return true;
    }
}
