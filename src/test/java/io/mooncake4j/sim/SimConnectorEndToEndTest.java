package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.memory.ModelPreset;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * End to end through the real connector on 127.0.0.1: bootstrap server, P and D engines with
 * {@link ConnectorSimWorker}s (side channel, bootstrap registration and query, transfer planning,
 * transfer engine), the proxy, and byte verification of every prompt position at D.
 */
class SimConnectorEndToEndTest {

    @ParameterizedTest(name = "{0}: P tp {1} -> D tp {2}")
    @CsvSource({
        "mock, 1, 1",
        "tcp, 1, 1",
        "tcp, 2, 1",
        "tcp, 1, 2",
        "mock, 2, 1",
        "mock, 1, 2",
    })
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void shouldMoveAndVerifyEveryByte(String protocol, int pTp, int dTp) {
        // 48 blocks per rank hold about four of these requests: the pools cycle
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 12, 200, 48, 3, pTp, dTp, protocol, 48, 3,
                11, Duration.ofSeconds(90));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        DemoRunner.Report r = DemoRunner.run(o, ConnectorSimWorker::factory, out);
        r.print(out);
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, r.exitCode(), text);
        assertEquals(12, r.ok(), text);
        assertEquals(0, r.mismatchedWords(), text);
        long bytesPerToken = (long) ModelPreset.TINY.numLayers() * ModelPreset.TINY.numKvHeads() * 2
                * ModelPreset.TINY.headSize() * ModelPreset.TINY.dtypeBytes();
        assertEquals(12L * 200 * bytesPerToken, r.bytesVerified(), "every prompt byte verified at D");
        assertTrue(r.dHitTokens() > 0, "the shared prefix was served from D's own cache: " + text);
        long pulledTokens = r.promptTokens() - r.dHitTokens();
        assertTrue(r.bytesMoved() >= pulledTokens * bytesPerToken, text);
        assertTrue(r.pStats().get("Num successful transfers").longValue() > 0, text);
        assertEquals(0L, r.pStats().get("Num failed transfers").longValue(), text);
        assertEquals(0L, r.dStats().get("Num failed recvs").longValue(), text);
    }
}
