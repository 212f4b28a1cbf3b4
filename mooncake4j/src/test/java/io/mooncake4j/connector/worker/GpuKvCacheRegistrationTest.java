package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.WorkerTestSupport.config;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpEngines;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import java.net.InetAddress;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Registration of GPU-resident KV caches through the worker with mooncake4j's TCP engine: allowed
 * when the engine can stage GPU memory (a {@link FakeDeviceMemory} stands in for CUDA here),
 * refused before anything is registered, with the engine's reason and the fix, when it cannot.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class GpuKvCacheRegistrationTest {

    private static final long PAGE = 16 * 1024;
    private static final int BLOCKS = 8;
    private static final List<String> LAYERS = List.of("model.layers.0.attn", "model.layers.1.attn");

    private static CoreEngine engine(DeviceMemory device) {
        TcpConfig cfg = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
        return TcpEngines.alone(cfg, device);
    }

    private static KvCacheConfig kvConfig() {
        return KvCacheConfig.of(new KvCacheGroup(LAYERS, KvCacheSpec.fullAttention(16, PAGE)));
    }

    private static MooncakeConnectorWorker consumer(CoreEngine engine) {
        return MooncakeConnectorWorker.builder(config(KvRole.KV_CONSUMER), engine, kvConfig())
                .memlockLimit(() -> OptionalLong.of(1L << 20)).build();
    }

    /** One storage per layer, K and V views of it. */
    private static Map<String, List<KvCacheTensor>> caches(List<? extends MemoryStorage> storages) {
        Map<String, List<KvCacheTensor>> m = new LinkedHashMap<>();
        for (int i = 0; i < LAYERS.size(); i++) {
            MemoryStorage s = storages.get(i);
            m.put(LAYERS.get(i), List.of(KvCacheTensor.contiguous(s, s.address(), BLOCKS, PAGE / 2),
                    KvCacheTensor.contiguous(s, s.address() + BLOCKS * PAGE / 2, BLOCKS, PAGE / 2)));
        }
        return m;
    }

    @Test
    void gpuKvCachesAreRegisteredWhenTheTcpEngineCanStageThem() {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(2)) {
            FakeDeviceMemory.DeviceBuffer g0 = fake.allocate(0, BLOCKS * PAGE);
            FakeDeviceMemory.DeviceBuffer g1 = fake.allocate(1, BLOCKS * PAGE);
            try (CoreEngine engine = engine(fake);
                 MooncakeConnectorWorker w = consumer(engine)) {
                RegistrationPlan plan = w.planRegistration(caches(List.of(g0, g1)));
                assertEquals(DeviceMemoryAccess.Kind.STAGED, plan.deviceAccess().get("cuda:0").kind());
                assertEquals(DeviceMemoryAccess.Kind.STAGED, plan.deviceAccess().get("cuda:1").kind());
                assertTrue(plan.locationProblem().isEmpty(), () -> plan.locationProblem().orElseThrow());
                assertTrue(plan.summary().contains("GPU memory cuda:0 staged: staged through pinned host bounce buffers"),
                        plan.summary());
                assertTrue(Json.write(plan.toJsonTree(), false).contains("\"device_access\":{\"cuda:0\":{\"kind\":\"staged\""),
                        Json.write(plan.toJsonTree(), false));

                KvRegistration reg = w.registerKvCaches(plan);
                assertEquals(List.of(g0.address(), g1.address()), reg.seenBaseAddresses());
                assertEquals(4, reg.regionCount());
                assertEquals(2, engine.localDescriptor().buffers().size(), "both GPU storages registered");
                assertEquals(plan, w.registeredPlan());
            }
        }
    }

    @Test
    void gpuKvCachesAreRefusedBeforeRegistrationWhenCudaIsUnavailable() {
        String why = "CUDA is unavailable: no NVIDIA driver (libcuda.so.1) could be loaded. Fix: install an NVIDIA driver";
        try (FakeDeviceMemory none = FakeDeviceMemory.unavailable(why);
             CoreEngine engine = engine(none);
             MooncakeConnectorWorker w = consumer(engine)) {
            MemoryStorage gpu = MemoryStorage.of(0x7000_0000_0000L, BLOCKS * PAGE, "cuda:0");
            MemoryStorage gpu2 = MemoryStorage.of(0x7100_0000_0000L, BLOCKS * PAGE, "cuda:0");
            ConnectorException e = assertThrows(ConnectorException.class,
                    () -> w.registerKvCaches(caches(List.of(gpu, gpu2))));
            assertTrue(e.getMessage().startsWith("Cannot register GPU memory with protocol tcp: storage 0x700000000000"),
                    e.getMessage());
            assertTrue(e.getMessage().contains(why), e.getMessage());
            assertTrue(e.getMessage().contains("host memory (cpu:N)") && e.getMessage().contains("rdma"), e.getMessage());
            assertEquals(0, engine.localDescriptor().buffers().size(), "nothing was registered");
        }
    }

    @Test
    void theRealTcpEngineOnAHostWithoutCudaRefusesGpuKvCachesWithTheProbesCause() {
        assumeFalse(CudaAvailability.isAvailable(), "CUDA is available on this host");
        try (CoreEngine engine = engine(CudaDeviceMemory.INSTANCE);
             MooncakeConnectorWorker w = consumer(engine)) {
            MemoryStorage gpu = MemoryStorage.of(0x7000_0000_0000L, BLOCKS * PAGE, "cuda:0");
            MemoryStorage gpu2 = MemoryStorage.of(0x7100_0000_0000L, BLOCKS * PAGE, "cuda:0");
            RegistrationPlan plan = w.planRegistration(caches(List.of(gpu, gpu2)));
            assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, plan.deviceAccess().get("cuda:0").kind());
            String problem = plan.locationProblem().orElseThrow();
            assertTrue(problem.contains(CudaAvailability.unavailabilityCause().getMessage()), problem);
            assertThrows(ConnectorException.class, () -> w.registerKvCaches(plan));
        }
    }

    @Test
    void hostKvCachesNeedNoGpuSupport() {
        try (FakeDeviceMemory none = FakeDeviceMemory.unavailable("no GPU here");
             io.mooncake4j.memory.HostMemoryAllocator alloc = new io.mooncake4j.memory.HostMemoryAllocator();
             CoreEngine engine = engine(none);
             MooncakeConnectorWorker w = consumer(engine)) {
            RegistrationPlan plan = w.planRegistration(caches(List.of(alloc.allocate(BLOCKS * PAGE),
                    alloc.allocate(BLOCKS * PAGE))));
            assertTrue(plan.deviceAccess().isEmpty());
            assertTrue(plan.deviceMemoryText().isEmpty());
            assertEquals(4, w.registerKvCaches(plan).regionCount());
        }
    }
}
