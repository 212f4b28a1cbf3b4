package io.mooncake4j.fuzz;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * CI's short fuzz run ({@code scripts/fuzz.sh --cases 150 --seed 1} in-process): every port of real
 * nodes, the still-serving checks and the thread and heap checks. RSS is given a wide tolerance here
 * (the test JVM's heap is not pre-touched, so heap growth shows in RSS); the long run through
 * {@code scripts/fuzz.sh} checks it tightly.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class FuzzSmokeTest {

    private static List<String> run(String... args) {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int rc;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            rc = FuzzMain.run(args, out);
        }
        List<String> lines = buf.toString(StandardCharsets.UTF_8).lines().toList();
        assertEquals(0, rc, "fuzz run failed:\n" + String.join("\n", lines));
        return lines;
    }

    @Test
    void shortSeedRunLeavesEveryPortServingWithinItsResourceBounds() {
        List<String> lines = run("--cases", "150", "--seed", "1", "--max-rss-growth-mib", "512");
        String summary = lines.getLast();
        assertTrue(summary.matches("fuzz: [34] ports, (450|600) cases, seed 1, 0 failures, threads [+-]\\d+, "
                + "heap [+-]\\d+ MiB, rss [+-]\\d+ MiB"), summary);
    }

    @Test
    void badArgumentsExitWithStatus2AndUsage() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            assertEquals(2, FuzzMain.run(new String[] {"--cases", "x"}, out));
            assertEquals(2, FuzzMain.run(new String[] {"--target", "no-such-port"}, out));
        }
        assertTrue(buf.toString(StandardCharsets.UTF_8).contains("usage: FuzzMain"));
    }

    @Test
    void caseRandomIsReproducibleFromSeedTargetAndCase() {
        assertEquals(FuzzMain.caseRandom(7, 1, 42).nextLong(), FuzzMain.caseRandom(7, 1, 42).nextLong());
        assertTrue(FuzzMain.caseRandom(7, 1, 42).nextLong() != FuzzMain.caseRandom(7, 1, 43).nextLong());
    }
}
