package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bin/mooncake4j bench} against the in-JVM mock engine: target and initiator in one JVM. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BenchCommandTest {

    private static final Pattern LISTENING = Pattern.compile("listening on (\\S+)");
    private static final Pattern SUMMARY = Pattern.compile(
            "Test completed: duration (\\d+\\.\\d\\d), batch count (\\d+), throughput (\\d+\\.\\d+) (\\S+)/s");

    private ExecutorService pool;
    private final List<BenchCommand> targets = new ArrayList<>();

    @BeforeEach
    void setUp() {
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        targets.forEach(BenchCommand::requestStop);
        pool.shutdown();
        assertTrue(pool.awaitTermination(20, TimeUnit.SECONDS), "bench threads finished");
    }

    /** Completes {@link #segment} with the name on the first 'listening on' line written. */
    private static final class ListeningWatcher extends OutputStream {
        final CompletableFuture<String> segment = new CompletableFuture<>();
        private final StringBuilder line = new StringBuilder();

        @Override
        public synchronized void write(int b) {
            if (b == '\n') {
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    segment.complete(m.group(1));
                }
                line.setLength(0);
            } else {
                line.append((char) b);
            }
        }
    }

    private record Started(String segment, Future<Integer> exit) {}

    private Started startTarget(String... extra) throws Exception {
        BenchCommand cmd = new BenchCommand();
        targets.add(cmd);
        ListeningWatcher watcher = new ListeningWatcher();
        List<String> args = new ArrayList<>(List.of("--mode=target", "--engine=mock", "--local_server_name=127.0.0.1",
                "--buffer_size=1M", "--threads=1", "--batch_size=1"));
        args.addAll(List.of(extra));
        PrintStream out = new PrintStream(watcher, true, StandardCharsets.UTF_8);
        Future<Integer> exit = pool.submit(() -> cmd.run(Flags.parse(args), out, out));
        return new Started(watcher.segment.get(20, TimeUnit.SECONDS), exit);
    }

    private record Result(int code, String out, String err) {}

    private static Result initiator(String... args) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("bench", "--mode=initiator", "--engine=mock",
                "--local_server_name=127.0.0.1"));
        all.addAll(List.of(args));
        int code = Main.run(all.toArray(String[]::new), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void initiatorPrintsMooncakeSummaryLineAndLatencyPercentilesForReadAndWrite() throws Exception {
        Started target = startTarget();
        for (String op : List.of("read", "write")) {
            Result r = initiator("--segment_id=" + target.segment(), "--operation=" + op, "--threads=2",
                    "--batch_size=8", "--block_size=4096", "--buffer_size=64K", "--duration=1.2", "--report_unit=MiB");
            assertEquals(0, r.code(), r.err());
            Matcher m = SUMMARY.matcher(r.out());
            assertTrue(m.find(), r.out());
            assertEquals("MiB", m.group(4));
            assertTrue(Long.parseLong(m.group(2)) > 0, "some batches ran");
            assertTrue(Double.parseDouble(m.group(1)) >= 1.2, "ran for the duration");
            assertTrue(r.out().matches("(?s).*p50 \\d+.*p90 \\d+.*p99 \\d+.*max \\d+.*"), r.out());
            assertTrue(r.err().contains("Invalid flag: buffer size is smaller than require_size, adjust to 65536")
                    == false, "64K = 4096*8*2 is enough: " + r.err());
            assertTrue(r.err().matches("(?s).*\\[\\s+1\\.\\d s\\] batches \\d+, \\d+\\.\\d\\d MiB/s.*"),
                    "a progress line after one second: " + r.err());
        }
        targets.get(0).requestStop();
        assertEquals(0, target.exit().get(10, TimeUnit.SECONDS));
    }

    @Test
    void memcpyBaselineIsMeasuredInTheSameRunWithTheRatioWhenAskedOrForShm() throws Exception {
        Started target = startTarget();
        Result r = initiator("--segment_id=" + target.segment(), "--memcpy_baseline", "--threads=2",
                "--batch_size=8", "--block_size=4096", "--buffer_size=64K", "--duration=0.5", "--report_unit=MiB");
        assertEquals(0, r.code(), r.err());
        Matcher m = Pattern.compile("Memcpy baseline: (\\d+) batches in (\\d+\\.\\d\\d) s, throughput (\\d+\\.\\d\\d) "
                + "MiB/s .*transfer/memcpy (\\d+\\.\\d\\d)x").matcher(r.out());
        assertTrue(m.find(), r.out());
        assertTrue(Long.parseLong(m.group(1)) > 0 && Double.parseDouble(m.group(3)) > 0, r.out());
        Matcher sum = SUMMARY.matcher(r.out());
        assertTrue(sum.find(), r.out());
        double expected = Double.parseDouble(sum.group(3)) / Double.parseDouble(m.group(3));
        assertEquals(expected, Double.parseDouble(m.group(4)), 0.01 + expected * 0.01, r.out());
        Result plain = initiator("--segment_id=" + target.segment(), "--threads=1", "--batch_size=8",
                "--block_size=4096", "--buffer_size=64K", "--duration=0.2");
        assertEquals(0, plain.code(), plain.err());
        assertFalse(plain.out().contains("Memcpy baseline"), "off by default for tcp: " + plain.out());
    }

    @Test
    void verifyWritesReadsBackAndChecksEveryByteThroughBothApis() throws Exception {
        Started target = startTarget();
        for (String api : List.of("sync", "async")) {
            Result r = initiator("--segment_id=" + target.segment(), "--verify", "--api=" + api, "--threads=2",
                    "--batch_size=4", "--block_size=1001", "--buffer_size=1", "--duration=0.3");
            assertEquals(0, r.code(), r.err());
            assertTrue(r.out().contains("every byte matched"), r.out());
            assertTrue(r.err().contains("adjust to 16016"), "2 x 1001 x 4 x 2 bytes: " + r.err());
        }
    }

    @Test
    void transferOutsideTheTargetBufferFailsTheRunWithExitCodeOne() throws Exception {
        Started target = startTarget("--buffer_size=4096", "--block_size=4096");
        Result r = initiator("--segment_id=" + target.segment(), "--operation=write", "--threads=1",
                "--batch_size=2", "--block_size=4096", "--duration=5");
        assertEquals(1, r.code(), r.out());
        assertTrue(r.err().contains("FAILED: worker 0: write batch returned"), r.err());
    }

    @Test
    void targetWithDurationExitsOnItsOwn() throws Exception {
        Started target = startTarget("--duration=0.2");
        assertEquals(0, target.exit().get(10, TimeUnit.SECONDS));
    }

    @Test
    void badFlagsAreUsageErrors() throws Exception {
        Result op = initiator("--segment_id=x:1", "--operation=copy");
        assertEquals(2, op.code());
        assertTrue(op.err().contains("Unsupported operation"), op.err());
        Result noSegment = initiator();
        assertEquals(2, noSegment.code());
        assertTrue(noSegment.err().contains("--segment_id"), noSegment.err());
        Result typo = initiator("--segment_id=x:1", "--bloc_size=4");
        assertEquals(2, typo.code());
        assertTrue(typo.err().contains("unknown flag --bloc_size"), typo.err());
    }

    @Test
    void unknownSegmentFailsWithAHint() throws Exception {
        Result r = initiator("--segment_id=127.0.0.1:1", "--duration=0.1", "--threads=1", "--buffer_size=8M");
        assertEquals(1, r.code());
        assertTrue(r.err().contains("cannot open segment '127.0.0.1:1'"), r.err());
    }

    @Test
    void histogramPercentilesAreWithinTwoPercent() {
        LatencyHistogram h = new LatencyHistogram();
        for (long v = 1; v <= 100_000; v++) {
            h.record(v * 1000);
        }
        assertEquals(100_000, h.count());
        assertEquals(100_000_000L, h.max());
        for (double q : new double[] {0.5, 0.9, 0.99}) {
            double exact = q * 100_000_000L;
            assertEquals(exact, h.percentile(q), exact * 0.02, "q=" + q);
        }
        LatencyHistogram other = new LatencyHistogram();
        other.record(5);
        h.add(other);
        assertEquals(100_001, h.count());
        for (int i = 0; i + 1 < LatencyHistogram.BUCKETS; i++) {
            assertTrue(LatencyHistogram.lowerBound(i) < LatencyHistogram.lowerBound(i + 1));
            assertEquals(i, LatencyHistogram.index(LatencyHistogram.lowerBound(i)));
        }
    }
}
