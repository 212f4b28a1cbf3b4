package io.mooncake4j.http;

import java.io.IOException;
import java.io.InputStream;

/**
 * Reads an HTTP request body within a size limit, and makes sure a client that sends too much
 * still reads the error reply.
 *
 * <p>A server that answers before it has read a request's body and then closes the connection
 * leaves the unread bytes in its socket's receive queue; the kernel then resets the connection,
 * and the reset makes the client's kernel drop the reply the client had not read yet. The client
 * sees "connection reset" or an empty reply instead of 413. So a body over the limit is read and
 * thrown away, up to {@link #drainLimit(int)} bytes in all, before {@link TooLargeException} is
 * thrown; the reply then reaches the client and the connection stays usable. Past the drain limit
 * (or when {@code Content-Length} declares more than it), nothing more is read and the connection
 * is closed: the bytes a client can make us read for one request are bounded, the memory is one
 * small buffer. Used by {@link Routes} for every route that takes a body.
 */
final class RequestBodies {

    /** A body over the limit; {@link #drained()} says whether all of it was read. */
    public static final class TooLargeException extends IOException {
        private static final long serialVersionUID = 1L;

        private final boolean drained;

        TooLargeException(int limit, boolean drained) {
            super("request body larger than " + limit + " bytes");
            this.drained = drained;
        }

        /** Whether the whole body was read (so the reply reaches the client and the connection can be reused). */
        public boolean drained() {
            return drained;
        }
    }

    private static final int DISCARD_CHUNK = 64 << 10;

    private RequestBodies() {}

    /** The most bytes read of a body over {@code limit} before giving up on it: 4 × the limit. */
    public static long drainLimit(int limit) {
        return 4L * limit;
    }

    /**
     * The body, at most {@code limit} bytes.
     *
     * @param in             the request body (not closed here)
     * @param declaredLength the {@code Content-Length}, or -1 when the body is chunked or has none
     * @param limit          largest body accepted, in bytes
     * @throws TooLargeException the body is longer than {@code limit}, after reading it away as above
     * @throws IOException       reading failed
     */
    public static byte[] read(InputStream in, long declaredLength, int limit) throws IOException {
        if (limit < 0) {
            throw new IllegalArgumentException("limit must be >= 0, got " + limit);
        }
        if (declaredLength > limit) {
            boolean drained = declaredLength <= drainLimit(limit) && discard(in, declaredLength);
            throw new TooLargeException(limit, drained);
        }
        byte[] b = in.readNBytes(limit);
        int next = in.read();
        if (next < 0) {
            return b;
        }
        boolean drained = discard(in, drainLimit(limit) - limit - 1);
        throw new TooLargeException(limit, drained);
    }

    /** Reads and drops at most {@code max} bytes; true when the stream ended within them. */
    private static boolean discard(InputStream in, long max) throws IOException {
        byte[] sink = new byte[(int) Math.min(DISCARD_CHUNK, Math.max(1, max + 1))];
        long left = max;
        while (true) {
            int n = in.read(sink, 0, (int) Math.min(sink.length, left + 1));
            if (n < 0) {
                return true;
            }
            left -= n;
            if (left < 0) {
                return false;
            }
        }
    }
}
