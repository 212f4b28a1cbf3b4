package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

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

    private static List<Path> entries(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.toList();
        }
    }

    @Test
    void shouldRemoveItsLogDirectoryAfterASuccessfulRun(@TempDir Path tmp) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = ProcessDemo.run(DemoCommand.parse(Flags.parse(List.of("--model", "tiny", "--requests", "2",
                "--prompt-tokens", "40", "--concurrency", "1"))), 1, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), tmp, List.of());
        String o = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, o + err.toString(StandardCharsets.UTF_8));
        assertTrue(o.contains("logs in " + tmp.resolve("mooncake4j-demo-")), o);
        assertTrue(o.contains("CPU time over the run") && o.contains("client "), o);
        assertTrue(java.util.regex.Pattern.compile("CPU s per GiB of KV +prefill [0-9.]+, decode [0-9.]+, reference "
                + "\\(stopped before the run\\) 0\\.000, proxy [0-9.]+, client [0-9.]+, total [0-9.]+").matcher(o).find(), o);
        assertTrue(o.contains("warm-up of 1 requests: 1 answered"), o);
        assertTrue(o.contains("demo --processes: 2 ok, 0 failed-as-expected, 0 wrong"), o);
        assertEquals(List.of(), entries(tmp), "the demo left files behind");
    }

    @Test
    void shouldRemoveItsLogDirectoryWhenAChildFailsAndShowTheLog(@TempDir Path tmp) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> ProcessDemo.run(
                DemoCommand.parse(Flags.parse(List.of("--model", "tiny", "--requests", "2"))), 0,
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8),
                tmp, List.of("-XX:+MooncakeNoSuchOption")));
        assertTrue(e.getMessage().contains("prefill exited before it was ready"), e.getMessage());
        String errText = err.toString(StandardCharsets.UTF_8);
        assertTrue(errText.contains("last lines of prefill's log") && errText.contains("MooncakeNoSuchOption"), errText);
        assertEquals(List.of(), entries(tmp), "the demo left files behind");
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
