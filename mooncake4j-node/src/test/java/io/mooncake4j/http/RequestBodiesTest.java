package io.mooncake4j.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RequestBodiesTest {

    /** Counts what was read from it. */
    private static final class Counting extends FilterInputStream {
        long read;

        Counting(byte[] b) {
            super(new ByteArrayInputStream(b));
        }

        @Override
        public int read() throws IOException {
            int c = super.read();
            if (c >= 0) {
                read++;
            }
            return c;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            int n = super.read(b, off, len);
            if (n > 0) {
                read += n;
            }
            return n;
        }
    }

    private static byte[] bytes(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31);
        }
        return b;
    }

    @Test
    void bodiesUpToTheLimitComeBackWhole() throws IOException {
        byte[] b = bytes(1000);
        assertArrayEquals(b, RequestBodies.read(new ByteArrayInputStream(b), 1000, 1000));
        assertArrayEquals(b, RequestBodies.read(new ByteArrayInputStream(b), -1, 1000));
        assertArrayEquals(new byte[0], RequestBodies.read(new ByteArrayInputStream(new byte[0]), 0, 1000));
    }

    @Test
    void aBodyOverTheLimitIsReadAwayWithinFourTimesTheLimit() {
        for (long declared : new long[] {1001, -1}) {
            for (int size : new int[] {1001, 4000}) {
                Counting in = new Counting(bytes(size));
                RequestBodies.TooLargeException e = assertThrows(RequestBodies.TooLargeException.class,
                        () -> RequestBodies.read(in, declared == -1 ? -1 : size, 1000));
                assertTrue(e.drained(), declared + " / " + size);
                assertEquals(size, in.read, "all of it was read: " + declared + " / " + size);
                assertTrue(e.getMessage().contains("1000 bytes"), e.getMessage());
            }
        }
    }

    @Test
    void pastFourTimesTheLimitReadingStops() {
        Counting chunked = new Counting(bytes(10_000));
        RequestBodies.TooLargeException e = assertThrows(RequestBodies.TooLargeException.class,
                () -> RequestBodies.read(chunked, -1, 1000));
        assertFalse(e.drained());
        assertTrue(chunked.read <= RequestBodies.drainLimit(1000) + 1, "read " + chunked.read);
        assertTrue(chunked.read > RequestBodies.drainLimit(1000), "read " + chunked.read);
        // a declared length past the drain limit: nothing is read at all
        Counting declared = new Counting(bytes(10_000));
        e = assertThrows(RequestBodies.TooLargeException.class, () -> RequestBodies.read(declared, 10_000, 1000));
        assertFalse(e.drained());
        assertEquals(0, declared.read);
    }

    @Test
    void aNegativeLimitIsRefused() {
        InputStream in = new ByteArrayInputStream(new byte[1]);
        assertThrows(IllegalArgumentException.class, () -> RequestBodies.read(in, 1, -1));
    }
}
