package io.mooncake4j.http;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * A node's route table, the {@link HttpFront.Handler} of its front door: each route is a method and a
 * path, and says whether it takes a request body. A route that takes one ({@link Builder#withBody}) is
 * handed the body already read, and protected without calling anything: a body declared over the
 * route's limit is answered 413 before it is read (then read away when it is not far over, so that
 * the connection stays usable), a chunked one is refused at its first chunk over the limit, the body is
 * read under a body-upload slot of the client network's share ({@link FairSlots}: when none is free
 * the slowest judged body is evicted for this one, else the request waits at most
 * {@link Builder#slotWait} and gets 503), and, as every body read through an {@link Exchange}, it is
 * held to the front's rate and deadline ({@link HttpLimits}): a stalled body closes its connection
 * and the route is never called. A route that reads no body says so ({@link Builder#withoutBody}); its
 * handler cannot read one ({@link Exchange#requestBody()} throws).
 *
 * <p>The table words nothing itself: the node's {@link Refusals} writes the answers the table gives
 * (413, 503), the node's {@link Unmatched} those for a path or method no route has (404, 405), in
 * the node's own error shape, and the node's {@link Failures} what a route threw.
 *
 * <p>Threads: built once, then read by the request threads; the body slots are thread-safe.
 */
public final class Routes implements HttpFront.Handler {

    /** A route whose request carries a body: {@code body} is all of it, within the route's limit. */
    @FunctionalInterface
    public interface BodyRoute {
        void handle(Exchange ex, byte[] body) throws IOException;
    }

    /**
     * A check before a route's body is read (the node is not ready, ...): false when it has answered
     * itself, and then the table reads nothing (the gate may read the body away, bounded by the front's
     * deadlines).
     */
    @FunctionalInterface
    public interface Gate {
        boolean admit(Exchange ex) throws IOException;
    }

    /** Why the table answered a request itself. */
    public enum Reason {
        /** The body is larger than the route's limit (declared, a chunk, or as read): 413. */
        TOO_LARGE(413),
        /** No body-upload slot came free for the client in time: 503. */
        NO_BODY_SLOT(503);

        private final int status;

        Reason(int status) {
            this.status = status;
        }

        public int status() {
            return status;
        }
    }

    /**
     * An answer the table gives itself.
     *
     * @param reason  why
     * @param limit   the route's body limit, in bytes
     * @param message the facts in English, for a node that adds no wording of its own
     */
    public record Refusal(Reason reason, int limit, String message) {
        public int status() {
            return reason.status();
        }
    }

    /** Words the table's own answers in the node's error shape: the JSON body (it may also set headers). */
    @FunctionalInterface
    public interface Refusals {
        byte[] json(Exchange ex, Refusal refusal);
    }

    /**
     * Handles what a route threw (an {@link IOException}: the client is gone; a runtime exception: an
     * error the node answers in its shape, when the response has not started).
     */
    @FunctionalInterface
    public interface Failures {
        void failed(Exchange ex, Exception e) throws IOException;
    }

    /** Answers a request no route matches: {@code allowed} is empty for an unknown path (404), else 405. */
    @FunctionalInterface
    public interface Unmatched {
        void answer(Exchange ex, Set<String> allowed) throws IOException;
    }

    private record Route(String method, String path, int maxBody, Gate gate, BodyRoute withBody,
                         HttpFront.Handler withoutBody) {}

    private final Map<String, Map<String, Route>> routes; // path -> method -> route
    private final FairSlots bodies;
    private final Duration slotWait;
    private final Refusals refusals;
    private final Unmatched unmatched;
    private final Failures failures;

    private Routes(Builder b) {
        this.routes = b.routes;
        this.bodies = new FairSlots(b.limits.bodySlots(), b.limits.bodySlotsPerClient(), b.limits::network);
        this.slotWait = b.slotWait;
        this.refusals = b.refusals;
        this.unmatched = b.unmatched;
        this.failures = b.failures;
    }

    /**
     * A table whose body routes take at most {@code maxBody} bytes unless they say otherwise, with the
     * body slots of {@code limits}.
     */
    public static Builder builder(HttpLimits limits, int maxBody, Refusals refusals, Unmatched unmatched) {
        return new Builder(limits, maxBody, refusals, unmatched);
    }

    /** Bodies evicted so far to make room for a newcomer. */
    public long bodyEvictions() {
        return bodies.evictions();
    }

    /** The body-upload slots (for counters). */
    public FairSlots bodySlots() {
        return bodies;
    }

    @Override
    public void handle(Exchange ex) throws IOException {
        try {
            dispatch(ex);
        } catch (IOException | RuntimeException e) {
            failures.failed(ex, e);
        }
    }

    private void dispatch(Exchange ex) throws IOException {
        Map<String, Route> byMethod = routes.get(ex.path());
        Route r = byMethod == null ? null : byMethod.get(ex.method());
        if (r == null) {
            unmatched.answer(ex, byMethod == null ? Set.of() : java.util.Collections.unmodifiableSet(new LinkedHashSet<>(byMethod.keySet())));
            return;
        }
        if (r.withoutBody != null) {
            ex.refuseBody(r.method + " " + r.path);
            r.withoutBody.handle(ex);
            return;
        }
        if (r.gate != null && !r.gate.admit(ex)) {
            return;
        }
        byte[] body = readBody(ex, r.maxBody);
        if (body != null) {
            r.withBody.handle(ex, body);
        }
    }

    /** The body, read under a slot within {@code limit}; null when the table has answered instead. */
    private byte[] readBody(Exchange ex, int limit) throws IOException {
        if (ex.declaredLength() > limit) {
            // refused at once: the answer leaves before the body is read (then read away if not too large)
            ex.answerBeforeBody(413, refusals.json(ex, tooLarge(limit)), RequestBodies.drainLimit(limit));
            return null;
        }
        InetAddress client = ex.clientAddress();
        FairSlots.Slot slot;
        try {
            slot = bodies.acquire(client, slotWait, ex.bodyHolder());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            slot = null;
        }
        if (slot == null) {
            send(ex, refusals.json(ex, new Refusal(Reason.NO_BODY_SLOT, limit, String.format(Locale.ROOT,
                    "too many request bodies being uploaded at once (%d, of which %d from %s); retry later",
                    bodies.total(), bodies.heldBy(client), client.getHostAddress()))), 503);
            return null;
        }
        try (FairSlots.Slot held = slot) {
            ex.limitBody(limit);
            return RequestBodies.read(ex.requestBody(), ex.declaredLength(), limit);
        } catch (RequestBodies.TooLargeException e) {
            send(ex, refusals.json(ex, tooLarge(limit)), 413);
            return null;
        } catch (Exchange.ChunkTooLargeException e) {
            ex.setHeader("Connection", "close");
            send(ex, refusals.json(ex, tooLarge(limit)), 413);
            return null;
        }
    }

    private static Refusal tooLarge(int limit) {
        return new Refusal(Reason.TOO_LARGE, limit, "the request body is larger than " + limit + " bytes");
    }

    private static void send(Exchange ex, byte[] json, int status) throws IOException {
        ex.setHeader("Content-Type", "application/json");
        ex.sendResponseHeaders(status, json.length == 0 ? -1 : json.length);
        try (OutputStream out = ex.responseBody()) {
            out.write(json);
        }
    }

    /** Registers routes; each says whether it takes a body. */
    public static final class Builder {
        private final HttpLimits limits;
        private final int maxBody;
        private final Refusals refusals;
        private final Unmatched unmatched;
        private final Map<String, Map<String, Route>> routes = new LinkedHashMap<>();
        private Duration slotWait = Duration.ofSeconds(10);
        private Failures failures = (ex, e) -> {
            if (e instanceof IOException io) {
                throw io;
            }
            throw (RuntimeException) e;
        };

        private Builder(HttpLimits limits, int maxBody, Refusals refusals, Unmatched unmatched) {
            this.limits = Objects.requireNonNull(limits, "limits");
            if (maxBody < 0) {
                throw new IllegalArgumentException("the body limit must be >= 0 bytes, got " + maxBody);
            }
            this.maxBody = maxBody;
            this.refusals = Objects.requireNonNull(refusals, "refusals");
            this.unmatched = Objects.requireNonNull(unmatched, "unmatched");
        }

        /** How long a request waits for a body-upload slot before its 503 (default 10 s). */
        public Builder slotWait(Duration wait) {
            if (wait.isNegative()) {
                throw new IllegalArgumentException("the body slot wait must be >= 0, got " + wait);
            }
            this.slotWait = wait;
            return this;
        }

        /** What a route threw; by default it goes on to the front (logged, 500 when nothing was answered). */
        public Builder failures(Failures f) {
            this.failures = Objects.requireNonNull(f, "failures");
            return this;
        }

        /** A route that takes a body of at most the table's limit. */
        public Builder withBody(String method, String path, BodyRoute route) {
            return withBody(method, path, maxBody, null, route);
        }

        /**
         * A route that takes a body of at most {@code maxBody} bytes, with a check before the body is
         * read (may be null).
         */
        public Builder withBody(String method, String path, int maxBody, Gate gate, BodyRoute route) {
            if (maxBody < 0) {
                throw new IllegalArgumentException("the body limit of " + method + " " + path + " must be >= 0, got "
                        + maxBody);
            }
            return add(new Route(method, path, maxBody, gate, Objects.requireNonNull(route, "route"), null));
        }

        /** A route that reads no request body (a GET); its handler cannot read one. */
        public Builder withoutBody(String method, String path, HttpFront.Handler route) {
            return add(new Route(method, path, 0, null, null, Objects.requireNonNull(route, "route")));
        }

        private Builder add(Route r) {
            Objects.requireNonNull(r.method, "method");
            Objects.requireNonNull(r.path, "path");
            if (routes.computeIfAbsent(r.path, p -> new LinkedHashMap<>()).putIfAbsent(r.method, r) != null) {
                throw new IllegalArgumentException("two routes for " + r.method + " " + r.path);
            }
            return this;
        }

        public Routes build() {
            return new Routes(this);
        }
    }
}
