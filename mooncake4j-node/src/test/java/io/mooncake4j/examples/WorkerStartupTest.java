package io.mooncake4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link WorkerStartup} against the scripted engine, with the testing preset's ports. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkerStartupTest {

    @Test
    void registersEveryLayerInOneBatchAndStartsTheProducersServers() {
        ScriptedTransferEngine engine = new ScriptedTransferEngine();
        MooncakeConnectorConfig config = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        try (WorkerStartup rank = new WorkerStartup(config, engine, 64)) {
            assertEquals(WorkerStartup.NUM_LAYERS, rank.registration.storages().size());
            assertEquals(1, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
            assertTrue(rank.worker.bootstrapServerUrl().orElseThrow().startsWith("http://127.0.0.1:"));
            assertTrue(rank.worker.sideChannelPort() > 0);
        }
        assertTrue(engine.isClosed(), "closing the rank closes its engine");
    }

    @Test
    void twoProducersWithTheTestingPresetDoNotCollide() {
        MooncakeConnectorConfig a = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        MooncakeConnectorConfig b = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        assertNotEquals(a.engineId(), b.engineId());
        assertEquals("127.0.0.1", a.hostname());
        assertEquals(0, a.bootstrapPort());
        try (WorkerStartup p1 = new WorkerStartup(a, new ScriptedTransferEngine(), 8);
             WorkerStartup p2 = new WorkerStartup(b, new ScriptedTransferEngine(), 8)) {
            assertNotEquals(p1.worker.bootstrapServerPort(), p2.worker.bootstrapServerPort());
            assertNotEquals(p1.worker.sideChannelPort(), p2.worker.sideChannelPort());
        }
    }

    @Test
    void aFailedRegistrationLeavesNothingBehind() {
        ScriptedTransferEngine engine = new ScriptedTransferEngine();
        engine.script(EngineMethod.BATCH_REGISTER_MEMORY).alwaysReturn(-1);
        MooncakeConnectorConfig config = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        RuntimeException e = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class,
                () -> new WorkerStartup(config, engine, 8));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        assertTrue(engine.isClosed(), "a failed start-up closes the engine");
    }
}
