package io.mooncake4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.metrics.MeteredTransferEngine;
import io.mooncake4j.metrics.MooncakeConnectorMetrics;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Optional: the connector's and the engine's meters in a Micrometer registry (needs micrometer-core). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MetricsExampleTest {

    @Test
    void theProducersTransferShowsUpUnderVllmsNames() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry(); // your Prometheus registry in production
        MooncakeConnectorConfig pConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        MooncakeConnectorConfig dConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_CONSUMER).build();
        Tags tags = Tags.of("engine", pConfig.engineId());
        MeteredTransferEngine pEngine = new MeteredTransferEngine(new ScriptedTransferEngine().copyData(true),
                registry, tags);
        try (WorkerStartup p = new WorkerStartup(pConfig, pEngine, 32);
             WorkerStartup d = new WorkerStartup(dConfig, new ScriptedTransferEngine().copyData(true), 32)) {
            MooncakeConnectorMetrics metrics = new MooncakeConnectorMetrics(tags);
            metrics.bindTo(registry);
            ExampleServer prefill = new ExampleServer(pConfig, p, 32, (id, blocks) -> { });
            prefill.onStats(metrics::record);
            ExampleServer decode = new ExampleServer(dConfig, d, 32, (id, blocks) -> { });
            prefill.submit("req-1", 40, KvTransferParams.forRemoteDecode("xfer-1").asMap());
            decode.submit("req-1", 40, KvTransferParams.forRemotePrefill("xfer-1", pConfig.engineId(),
                    p.worker.bootstrapServerUrl().orElseThrow()).asMap());

            ExampleServerTest.stepUntil(() -> decode.finished().containsKey("req-1")
                    && prefill.freeBlockCount() == 32, prefill, decode);
            prefill.step(); // the step after the transfer reports its statistics

            assertEquals(1, registry.get("vllm:mooncake_xfer_time").timer().count());
            long bytes = 3 * WorkerStartup.PAGE_BYTES * WorkerStartup.NUM_LAYERS; // 3 blocks of 4 layers
            assertEquals(bytes, registry.get("vllm:mooncake_bytes_transferred").summary().totalAmount(), 1e-6);
            assertEquals(bytes, registry.get("mooncake4j.engine.bytes").tag("op", "write").counter().count(), 1e-6);
            assertEquals(0, registry.get("vllm:mooncake_num_failed_transfers").counter().count(), 1e-6);
        }
    }
}
