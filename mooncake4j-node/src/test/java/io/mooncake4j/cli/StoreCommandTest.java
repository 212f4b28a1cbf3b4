package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code store} flag checks that need no master: each is a one-line usage error (exit 2) before any
 * connection is tried. The actions themselves run against an in-memory master in
 * {@link StorePoolCommandTest}, and against a real one as docs/store.md shows.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StoreCommandTest {

    @Test
    void segmentSizeZeroIsNotForAHold() {
        CliErrorsTest.usageError(new String[] {"store", "hold", "--master", "127.0.0.1:1", "--segment-size", "0"},
                "--segment-size must be positive, got 0");
        CliErrorsTest.usageError(new String[] {"store", "put", "--master", "127.0.0.1:1", "--key", "k", "--segment-size", "-1"},
                "--segment-size must be positive or 0, got -1");
        CliErrorsTest.usageError(new String[] {"store", "bench", "--master", "127.0.0.1:1", "--segment-size", "-1"},
                "--segment-size must be positive or 0, got -1");
    }

    @Test
    void theActionAndTheMasterAreRequiredAndUnknownFlagsNamed() {
        CliErrorsTest.usageError(new String[] {"store", "--master", "127.0.0.1:1"}, "put, get, exists, rm, hold or bench");
        CliErrorsTest.usageError(new String[] {"store", "hold"}, "--master HOST:PORT is required");
        CliErrorsTest.usageError(new String[] {"store", "hold", "--master", "127.0.0.1:1", "--frobnicate", "1"},
                "unknown flag --frobnicate");
        CliErrorsTest.usageError(new String[] {"store", "dance", "--master", "127.0.0.1:1"}, "unknown store action 'dance'");
    }

    @Test
    void aPutTakesExactlyOneValueAndOutIsForGet() {
        CliErrorsTest.usageError(new String[] {"store", "put", "--master", "127.0.0.1:1", "--key", "k"},
                "exactly one of --value TEXT, --file PATH or --size BYTES");
        CliErrorsTest.usageError(new String[] {"store", "put", "--master", "127.0.0.1:1", "--key", "k", "--value", "a",
            "--size", "3"}, "exactly one of");
        CliErrorsTest.usageError(new String[] {"store", "put", "--master", "127.0.0.1:1", "--key", "k", "--file",
            "/nonexistent/file"}, "--file /nonexistent/file is not a readable file");
        CliErrorsTest.usageError(new String[] {"store", "exists", "--master", "127.0.0.1:1", "--key", "k", "--out", "x"},
                "--out is for get");
    }

    @Test
    void aBenchSegmentTooSmallForItsBatchesIsRefusedUpFront() {
        CliErrorsTest.Result r = CliErrorsTest.usageError(new String[] {"store", "bench", "--master", "127.0.0.1:1",
                "--segment-size", "1M", "--value-size", "64K", "--batch", "128", "--raw"}, "--segment-size 1048576 is too small");
        assertTrue(r.err().contains("2 threads"), "the raw batch counts as a thread's worth: " + r.err());
        assertEquals(2, r.code());
    }
}
