package io.mooncake4j.engine.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryStorage;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A GPU-over-tcp registration against the scripted engine, no hand-written engine needed. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ScriptedGpuRegistrationTest {

    private static final long PAGE = 4096;

    /** One layer whose KV cache lies at cuda:0 (an address the test never touches: no data is copied). */
    private static Map<String, List<KvCacheTensor>> gpuCaches() {
        MemoryStorage gpu = MemoryStorage.of(0x7f0000000000L, PAGE * 8, "cuda:0");
        Map<String, List<KvCacheTensor>> m = new LinkedHashMap<>();
        m.put("layer.0", List.of(KvCacheTensor.contiguous(gpu, gpu.address(), 8, PAGE)));
        return m;
    }

    private static KvCacheConfig config() {
        return KvCacheConfig.of(new KvCacheGroup(List.of("layer.0"), KvCacheSpec.fullAttention(16, PAGE)));
    }

    @Test
    void gpuMemoryOverTcpIsRefusedUntilTheScriptSaysTheEngineStagesIt() {
        MooncakeConnectorConfig cfg = MooncakeConnectorConfig.forTesting(KvRole.KV_CONSUMER).build();
        try (ScriptedTransferEngine refused = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = new MooncakeConnectorWorker(cfg, refused, config())) {
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(gpuCaches()));
            assertTrue(e.getMessage().contains("cuda:0"), e.getMessage());
            assertEquals(0, refused.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
        }
        try (ScriptedTransferEngine staged = new ScriptedTransferEngine()
                     .scriptDeviceMemoryAccess(l -> DeviceMemoryAccess.staged("test staging of " + l));
             MooncakeConnectorWorker w = new MooncakeConnectorWorker(cfg, staged, config())) {
            assertEquals(1, w.registerKvCaches(gpuCaches()).storages().size());
            assertEquals(0x7f0000000000L, staged.registeredBuffers().getFirst().address());
        }
    }
}
