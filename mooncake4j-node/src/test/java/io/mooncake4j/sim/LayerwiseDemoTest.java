package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.memory.ModelPreset;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code demo --layerwise}: the reference engine's layer-wise prefill through the real connector. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LayerwiseDemoTest {

    private static DemoRunner.Report run(int pTp, int dTp, boolean layerwise) {
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 10, 200, 48, 2, pTp, dTp, "mock", 96, 3, 7,
                Duration.ofSeconds(40), "cpu", 0, 0, layerwise, Duration.ofNanos(200_000));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        DemoRunner.Report r = DemoRunner.run(o, ConnectorSimWorker::factory, out);
        r.print(out);
        assertEquals(0, r.exitCode(), buf.toString(StandardCharsets.UTF_8));
        return r;
    }

    @Test
    void layerwisePrefillMovesTheSameVerifiedBytesAsWholeRequests() {
        DemoRunner.Report lw = run(1, 1, true);
        DemoRunner.Report whole = run(1, 1, false);
        assertEquals(10, lw.ok());
        assertEquals(whole.bytesVerified(), lw.bytesVerified(), "same workload, same verified bytes");
        assertTrue(lw.bytesVerified() > 0);
    }

    @Test
    void layerwiseWorksAcrossHeterogeneousTp() {
        DemoRunner.Report r = run(2, 1, true);
        assertEquals(10, r.ok());
    }

    @Test
    void theExtraConfigKeyTurnsItOn() {
        String json = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_producer\",\"engine_id\":\"e\","
                + "\"kv_connector_extra_config\":{\"layerwise_push\":true}}";
        assertTrue(MooncakeConnectorConfig.fromKvTransferConfigJson(json, Map.of()).build().layerwisePush());
        String off = json.replace("{\"layerwise_push\":true}", "{}");
        assertEquals(false, MooncakeConnectorConfig.fromKvTransferConfigJson(off, Map.of()).build().layerwisePush());
        MooncakeConfigException e = assertThrows(MooncakeConfigException.class, () -> MooncakeConnectorConfig
                .fromKvTransferConfigJson(json.replace("true", "\"yes\""), Map.of()));
        assertTrue(e.getMessage().contains("layerwise_push"), e.getMessage());
    }
}
