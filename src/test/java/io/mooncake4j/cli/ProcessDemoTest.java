package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bin/mooncake4j demo --processes}: four real JVMs (P, D, kv_both reference, proxy) on loopback. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ProcessDemoTest {

    private static int run(ByteArrayOutputStream out, ByteArrayOutputStream err, String... args) {
        String[] full = new String[args.length + 1];
        full[0] = "demo";
        System.arraycopy(args, 0, full, 1, args.length);
        return Main.run(full, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    @Test
    void shouldRunTheWorkloadThroughSeparateProcessesAndMatchTheReference() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = run(out, err, "--processes", "--model", "tiny", "--requests", "6", "--prompt-tokens", "100",
                "--p-tp", "2", "--concurrency", "2");
        String o = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, o + err.toString(StandardCharsets.UTF_8));
        assertTrue(o.contains("prefill    pid ") && o.contains("decode     pid ") && o.contains("proxy      pid "), o);
        assertTrue(o.contains("P tp 2 -> D tp 1"), o);
        assertTrue(o.contains("demo --processes: 6 ok, 0 failed-as-expected, 0 wrong"), o);
        assertTrue(o.contains("P and D freed every block after the run"), o);
        assertTrue(o.contains(", 0 mismatched 8-byte words"), o);
        assertTrue(o.contains("OK: every completion equals the kv_both reference; every process exited cleanly"), o);
    }

    @Test
    void shouldRejectWhatTheProcessesCannotRun() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        assertEquals(2, run(out, err, "--processes", "--protocol", "mock"));
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("--processes runs serve nodes over TCP"),
                err.toString(StandardCharsets.UTF_8));
    }
}
