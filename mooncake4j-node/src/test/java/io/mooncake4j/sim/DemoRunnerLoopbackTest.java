package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.memory.ModelPreset;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The demo driver (bootstrap server, engines, proxy, report) over the in-test connector stand-in. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DemoRunnerLoopbackTest {

    @Test
    void shouldReportEveryRequestVerifiedAndExitZero() {
        LoopbackHub hub = new LoopbackHub();
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 12, 160, 32, 3, 2, 2, "mock", 48, 3, 1,
                Duration.ofSeconds(30));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        DemoRunner.Report r = DemoRunner.run(o, protocol -> hub.factory(), out);
        r.print(out);
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, r.exitCode(), text);
        assertEquals(12, r.ok());
        assertEquals(12 * 160, r.promptTokens());
        assertEquals(36, r.generatedTokens());
        assertTrue(r.dHitTokens() > 0, "the shared prefix hits D's cache");
        assertEquals(r.bytesVerified(), 12L * 160 * 4 * 4 * 2 * 64 * 2, "every prompt byte, both ranks");
        assertTrue(text.contains("OK: every byte verified"), text);
        assertTrue(text.contains("Num successful transfers"), text);
    }

    @Test
    void shouldExitNonZeroWhenALoadFails() {
        LoopbackHub hub = new LoopbackHub();
        java.util.concurrent.atomic.AtomicInteger matches = new java.util.concurrent.atomic.AtomicInteger();
        hub.failWhen(t -> matches.incrementAndGet() == 3);
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 9, 64, 0, 2, 1, 1, "mock", 64, 9, 1,
                Duration.ofSeconds(30));
        DemoRunner.Report r = DemoRunner.run(o, protocol -> hub.factory(),
                new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
        assertEquals(1, r.failed());
        assertEquals(8, r.ok());
        assertEquals(1, r.exitCode());
        assertTrue(r.errors().getFirst().contains("KV load failed"), r.errors().toString());
    }

    @Test
    void shouldRejectAPoolTooSmallForOneRequest() {
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 1, 1000, 0, 1, 1, 1, "mock", 8, 1, 1,
                Duration.ofSeconds(5));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> DemoRunner.run(o, protocol -> new LoopbackHub().factory(), System.out));
        assertTrue(e.getMessage().contains("needs 63 blocks"), e.getMessage());
    }

    @Test
    void shouldSizeDefaultPoolsToTwoGibibytesPerEngine() {
        DemoRunner.Options d = DemoRunner.Options.defaults();
        assertEquals(1024, d.blocksFor(1), "Llama-3-8B: 2 MiB per block over 32 layers");
        assertEquals(1024, d.blocksFor(2), "the same per-engine budget at TP 2");
        DemoRunner.Options tiny = new DemoRunner.Options(ModelPreset.TINY, 64, 512, 0, 4, 1, 1, "tcp", 0, 4, 1,
                Duration.ofSeconds(5));
        assertEquals(4 * 4 * 33, tiny.blocksFor(1), "small models: four times what the requests in flight need");
        assertEquals(0.0, DemoRunner.percentile(new double[0], 50));
        assertEquals(3.0, DemoRunner.percentile(new double[] {1, 2, 3, 4}, 75));
    }
}
