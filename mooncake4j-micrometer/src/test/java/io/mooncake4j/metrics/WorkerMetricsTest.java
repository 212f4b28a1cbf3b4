package io.mooncake4j.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.WorkerCounters;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Every counter of {@link WorkerCounters} an operator needs is a meter, read from the worker at scrape. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkerMetricsTest {

    @Test
    void refusalsDroppedAnswersAndBootstrapClosuresAreMetersWithTheirReasons() {
        ScriptedTransferEngine engine = new ScriptedTransferEngine();
        MooncakeConnectorConfig config = MooncakeConnectorConfig.builder().kvRole(KvRole.KV_BOTH)
                .engineId("metrics-engine").protocol("tcp").hostname("127.0.0.1").build();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
             MooncakeConnectorWorker w = MooncakeConnectorWorker.builder(config, engine,
                     KvCaches.allocate(ModelPreset.TINY, 1, 4, KvCacheLayout.FUSED, alloc::allocate).config())
                     .memlockLimit(OptionalLong::empty).build()) {
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            new MooncakeWorkerMetrics(w, Tags.of("engine", "metrics-engine")).bindTo(registry);
            WorkerCounters c = w.counters();
            Map<String, ToLongFunction<WorkerCounters>> byReason = Map.of(
                    MooncakeWorkerMetrics.ANSWERS_DROPPED + "/protocol", k -> k.answersDropped().protocol(),
                    MooncakeWorkerMetrics.ANSWERS_DROPPED + "/peer_gone", k -> k.answersDropped().peerGone(),
                    MooncakeWorkerMetrics.ANSWERS_DROPPED + "/queue_full", k -> k.answersDropped().queueFull(),
                    MooncakeWorkerMetrics.ANSWERS_DROPPED + "/closing", k -> k.answersDropped().closing(),
                    MooncakeWorkerMetrics.BOOTSTRAP_CLOSED + "/evicted", k -> k.bootstrapClosed().evicted(),
                    MooncakeWorkerMetrics.BOOTSTRAP_CLOSED + "/refused", k -> k.bootstrapClosed().refused(),
                    MooncakeWorkerMetrics.BOOTSTRAP_CLOSED + "/expired", k -> k.bootstrapClosed().expired());
            byReason.forEach((key, value) -> {
                String[] nameReason = key.split("/");
                FunctionCounter f = registry.find(nameReason[0]).tag("reason", nameReason[1]).functionCounter();
                assertNotNull(f, key);
                assertEquals(value.applyAsLong(c), (long) f.count(), key);
            });
            for (String name : new String[] {MooncakeWorkerMetrics.SELF_AIMED_REFUSALS,
                    MooncakeWorkerMetrics.PEERS_DROPPED}) {
                FunctionCounter f = registry.find(name).functionCounter();
                assertNotNull(f, name);
                assertEquals(name.endsWith("refusals") ? c.selfAimedRefusals() : c.peersDropped(), (long) f.count());
            }
        } finally {
            engine.close();
        }
    }
}
