package io.mooncake4j.http;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/** What the front-door tests share: reading a raw answer, and waiting for an event with a generous deadline. */
final class RawHttp {

    /** How long a test waits for an answer, a close or an event before it fails. */
    static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(60);

    private RawHttp() {
    }

    /** What the server sends until it closes; null when it neither answers nor closes in time. */
    static String answerOrClose(Socket s) throws IOException {
        s.setSoTimeout((int) TimeUnit.NANOSECONDS.toMillis(WAIT_NANOS));
        StringBuilder got = new StringBuilder();
        try {
            InputStream in = s.getInputStream();
            byte[] b = new byte[4096];
            int n;
            while ((n = in.read(b)) >= 0) {
                got.append(new String(b, 0, n, StandardCharsets.ISO_8859_1));
            }
        } catch (SocketTimeoutException e) {
            return null;
        } catch (IOException reset) {
            // closed by a reset: what came before is the answer
        }
        return got.toString();
    }

    /** Waits until {@code what} holds; fails with {@code failure} after {@link #WAIT_NANOS}. */
    static void await(BooleanSupplier what, String failure) {
        long end = System.nanoTime() + WAIT_NANOS;
        while (!what.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, failure);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
    }
}
