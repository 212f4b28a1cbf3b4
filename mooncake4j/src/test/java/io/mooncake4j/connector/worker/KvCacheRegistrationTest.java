package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.WorkerTestSupport.config;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.testing.EngineCall;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryStorage;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Registration as vLLM's register_kv_caches does it (spec §6.3), on a consumer so no listener starts. */
@Timeout(value = 20, unit = TimeUnit.SECONDS)
class KvCacheRegistrationTest {

    private static final long PAGE = 16 * 1024; // 4 KV heads x 64 x fp16 x block 16, as in vLLM's tests
    private static final int BLOCKS = 8;
    private static final OptionalLong ONE_MIB = OptionalLong.of(1L << 20);

    private static KvCacheConfig fullAttention(List<String> layers, long page) {
        return KvCacheConfig.of(new KvCacheGroup(layers, KvCacheSpec.fullAttention(16, page)));
    }

    /** A distinct fake storage per call; nothing is dereferenced because the engine does not copy. */
    private static MemoryStorage storage(long base, long bytes) {
        return MemoryStorage.of(base, bytes, "cpu:0");
    }

    private static MooncakeConnectorWorker consumer(ScriptedTransferEngine engine, KvCacheConfig kv) {
        return MooncakeConnectorWorker.builder(config(KvRole.KV_CONSUMER), engine, kv)
                .memlockLimit(() -> ONE_MIB).build();
    }

    @Test
    void preservesLayerOrderOfTheInputMap() {
        List<String> order = List.of("model.layers.2.self_attn", "model.layers.0.self_attn", "model.layers.1.self_attn");
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        long base = 0x10_0000;
        for (String layer : order) {
            MemoryStorage s = storage(base, PAGE * BLOCKS);
            caches.put(layer, List.of(KvCacheTensor.contiguous(s, base, BLOCKS, PAGE)));
            base += 0x10_0000;
        }
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of(
                     "model.layers.0.self_attn", "model.layers.1.self_attn", "model.layers.2.self_attn"), PAGE))) {
            KvRegistration reg = w.registerKvCaches(caches);
            assertEquals(order, reg.registeredLayerNames());
            assertEquals(List.of(2, 0, 1), reg.registeredLayerIndices());
            assertEquals(List.of(0x10_0000L, 0x20_0000L, 0x30_0000L), reg.kvCachesBaseAddr());
            EngineCall call = engine.calls(EngineMethod.BATCH_REGISTER_MEMORY).getFirst();
            assertArrayEquals(new long[] {0x10_0000, 0x20_0000, 0x30_0000}, call.longs(0));
            assertArrayEquals(new long[] {PAGE * BLOCKS, PAGE * BLOCKS, PAGE * BLOCKS}, call.longs(1));
        }
    }

    @Test
    void registersASharedStorageOnceWithItsBaseAndSize() {
        long base = 0x40_0000;
        long layerBytes = PAGE * BLOCKS;
        MemoryStorage shared = storage(base, 3 * layerBytes + 4096);
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        List<String> layers = List.of("model.layers.0.attn", "model.layers.1.attn", "model.layers.2.attn");
        for (int i = 0; i < 3; i++) {
            caches.put(layers.get(i), List.of(KvCacheTensor.contiguous(shared, base + i * layerBytes, BLOCKS, PAGE)));
        }
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(layers, PAGE))) {
            KvRegistration reg = w.registerKvCaches(caches);
            assertEquals(1, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
            EngineCall call = engine.calls(EngineMethod.BATCH_REGISTER_MEMORY).getFirst();
            assertArrayEquals(new long[] {base}, call.longs(0));
            assertArrayEquals(new long[] {3 * layerBytes + 4096}, call.longs(1));
            assertEquals(List.of(base), reg.seenBaseAddresses());
            assertEquals(List.of(base, base + layerBytes, base + 2 * layerBytes), reg.kvCachesBaseAddr());
            assertEquals(0, engine.callCount(EngineMethod.REGISTER_MEMORY));
        }
    }

    @Test
    void perRegionListsAreParallelForPiecesAndSeparateKandV() {
        long half = PAGE / 2;
        // layer 0: one tensor whose blocks are two pieces (K and V halves num_blocks apart) -> 2 regions
        MemoryStorage s0 = storage(0x100_0000, PAGE * BLOCKS);
        KvCacheTensor split = KvCacheTensor.strided(s0, s0.address(), BLOCKS, half, 2, half * BLOCKS, half);
        // layer 1: separate dense K and V tensors in their own storages -> 2 regions of page/2 each
        MemoryStorage k = storage(0x200_0000, half * BLOCKS);
        MemoryStorage v = storage(0x300_0000, half * BLOCKS);
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        caches.put("model.layers.0.attn", List.of(split));
        caches.put("model.layers.1.attn", List.of(KvCacheTensor.contiguous(k, k.address(), BLOCKS, half),
                KvCacheTensor.contiguous(v, v.address(), BLOCKS, half)));
        caches.put("model.layers.2.mlp", List.of(KvCacheTensor.contiguous(storage(0x400_0000, PAGE), 0x400_0000, 1,
                PAGE)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine,
                     fullAttention(List.of("model.layers.0.attn", "model.layers.1.attn"), PAGE))) {
            KvRegistration reg = w.registerKvCaches(caches);
            assertEquals(4, reg.regionCount());
            for (List<?> list : List.of(reg.kvCachesBaseAddr(), reg.blockLenPerLayer(), reg.kvBlockLenPerLayer(),
                    reg.registeredLayerNames(), reg.registeredLayerIndices(), reg.registeredGroupIndices())) {
                assertEquals(4, list.size());
            }
            assertEquals(List.of(0x100_0000L, 0x100_0000L + half * BLOCKS, 0x200_0000L, 0x300_0000L),
                    reg.kvCachesBaseAddr());
            assertEquals(List.of(half, half, half, half), reg.blockLenPerLayer());
            assertEquals(List.of(half, half, half, half), reg.kvBlockLenPerLayer());
            assertEquals(List.of(0, 0, 1, 1), reg.registeredLayerIndices());
            assertEquals(List.of(0, 0, 0, 0), reg.registeredGroupIndices());
            assertEquals(List.of(0x100_0000L, 0x200_0000L, 0x300_0000L), reg.seenBaseAddresses());
            assertEquals(List.of("model.layers.2.mlp"), w.registeredPlan().skippedLayers());
        }
    }

    @Test
    void recordsGroupIndicesAndPaddedMambaLengths() {
        long mambaPage = 12 * 1024; // padded to the attention page
        KvCacheConfig kv = KvCacheConfig.of(
                new KvCacheGroup(List.of("model.layers.0.attn"), KvCacheSpec.fullAttention(16, PAGE)),
                new KvCacheGroup(List.of("model.layers.1.mixer"), KvCacheSpec.mamba(16, mambaPage)));
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        caches.put("model.layers.0.attn", List.of(KvCacheTensor.contiguous(storage(0x10_0000, PAGE * 4), 0x10_0000, 4,
                PAGE)));
        caches.put("model.layers.1.mixer", List.of(KvCacheTensor.dense(storage(0x20_0000, PAGE * 4), 0x20_0000, 4,
                PAGE, mambaPage)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, kv)) {
            KvRegistration reg = w.registerKvCaches(caches);
            assertEquals(List.of(0, 1), reg.registeredGroupIndices());
            assertEquals(List.of(PAGE, PAGE), reg.blockLenPerLayer());
            assertEquals(List.of(PAGE, PAGE), reg.kvBlockLenPerLayer(), "non-attention layers transfer the stride");
        }
    }

    @Test
    void physicalBlocksPerLogicalBlockDividesTheTransferLength() {
        MemoryStorage s = storage(0x10_0000, PAGE * 8);
        Map<String, List<KvCacheTensor>> caches = Map.of("model.layers.0.attn",
                List.of(KvCacheTensor.contiguous(s, s.address(), 8, PAGE / 2)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = MooncakeConnectorWorker.builder(config(KvRole.KV_CONSUMER), engine,
                     fullAttention(List.of("model.layers.0.attn"), PAGE)).physicalBlocksPerLogicalBlock(2)
                     .memlockLimit(() -> ONE_MIB).build()) {
            assertEquals(List.of(PAGE / 2), w.registerKvCaches(caches).kvBlockLenPerLayer());
        }
    }

    @Test
    void emptyInputRaisesTheNothingRegisteredError() {
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("model.layers.0.attn"), PAGE))) {
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(Map.of()));
            assertEquals("No KV cache tensors were registered with Mooncake.", e.getMessage());
            assertEquals(0, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
        }
    }

    @Test
    void allLayersSkippedRaisesTheNothingRegisteredError() {
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        caches.put("model.layers.7.attn", List.of(KvCacheTensor.contiguous(storage(0x10_0000, PAGE), 0x10_0000, 1,
                PAGE)));
        caches.put("no.index.here", List.of(KvCacheTensor.contiguous(storage(0x20_0000, PAGE), 0x20_0000, 1, PAGE)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("model.layers.0.attn"), PAGE))) {
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(caches));
            assertEquals(MooncakeConnectorWorker.NO_KV_CACHES_MESSAGE, e.getMessage());
            assertEquals(0, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
            assertEquals(null, w.registration());
        }
    }

    @Test
    void engineFailureIsRetriedThenRaisedWithDiagnostics() {
        MooncakeConnectorConfig cfg = config(KvRole.KV_CONSUMER).toBuilder().registrationRetries(2).build();
        MemoryStorage s = MemoryStorage.of(0x10_0000, PAGE * BLOCKS, "cpu:1");
        Map<String, List<KvCacheTensor>> caches = Map.of("model.layers.0.attn",
                List.of(KvCacheTensor.contiguous(s, s.address(), BLOCKS, PAGE)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = MooncakeConnectorWorker.builder(cfg, engine,
                     fullAttention(List.of("model.layers.0.attn"), PAGE)).memlockLimit(() -> ONE_MIB).build()) {
            engine.script(EngineMethod.BATCH_REGISTER_MEMORY).alwaysReturn(ErrorCodes.MEMORY);
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(caches));
            KvCacheRegistrationException r = assertInstanceOf(KvCacheRegistrationException.class, e);
            assertTrue(e.getMessage().startsWith("Mooncake batch memory registration failed."), e.getMessage());
            assertTrue(e.getMessage().contains("-302"), e.getMessage());
            assertEquals(3, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
            assertEquals(3, r.attempts());
            assertEquals(ErrorCodes.MEMORY, r.returnCode());
            assertEquals(PAGE * BLOCKS, r.totalBytes());
            assertEquals(ONE_MIB, r.memlockLimit());
            assertEquals(List.of("cpu:1"), r.locations());
            assertEquals(null, w.registration());
        }
    }

    @Test
    void aTransientEngineFailureIsRetriedOnce() {
        MemoryStorage s = storage(0x10_0000, PAGE);
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("model.layers.0.attn"), PAGE))) {
            engine.script(EngineMethod.BATCH_REGISTER_MEMORY).failFirst(1, -1);
            KvRegistration reg = w.registerKvCaches(Map.of("model.layers.0.attn",
                    List.of(KvCacheTensor.contiguous(s, s.address(), 1, PAGE))));
            assertEquals(1, reg.regionCount());
            assertEquals(2, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
        }
    }

    @Test
    void transferLengthAboveTheStrideRaises() {
        MemoryStorage s = storage(0x10_0000, PAGE * BLOCKS);
        Map<String, List<KvCacheTensor>> caches = Map.of("model.layers.5.attn",
                List.of(KvCacheTensor.contiguous(s, s.address(), BLOCKS, PAGE / 4)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("model.layers.5.attn"), PAGE))) {
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(caches));
            assertEquals("Mooncake transfer length exceeds physical block stride for model.layers.5.attn: "
                    + "kv_block_len=16384, block_len=4096.", e.getMessage());
            assertEquals(0, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
        }
    }

    @Test
    void gpuMemoryOverTcpIsRejectedBeforeRegistration() {
        MemoryStorage gpu = MemoryStorage.of(0x7000_0000_0000L, PAGE * BLOCKS, "cuda:0");
        Map<String, List<KvCacheTensor>> caches = Map.of("model.layers.0.attn",
                List.of(KvCacheTensor.contiguous(gpu, gpu.address(), BLOCKS, PAGE)));
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine();
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("model.layers.0.attn"), PAGE))) {
            ConnectorException e = assertThrows(ConnectorException.class, () -> w.registerKvCaches(caches));
            assertTrue(e.getMessage().contains("cuda:0") && e.getMessage().contains("rdma"), e.getMessage());
            assertEquals(0, engine.callCount(EngineMethod.BATCH_REGISTER_MEMORY));
        }
    }

    @Test
    void rdmaPlanAboveTheMemlockLimitWarnsWithTheFix() {
        MemoryStorage host = storage(0x10_0000, 4L << 20);
        MemoryStorage gpu = MemoryStorage.of(0x7000_0000_0000L, 64L << 20, "cuda:0");
        Map<String, List<KvCacheTensor>> caches = new LinkedHashMap<>();
        caches.put("model.layers.0.attn", List.of(KvCacheTensor.contiguous(host, host.address(), 256, PAGE)));
        caches.put("model.layers.1.attn", List.of(KvCacheTensor.contiguous(gpu, gpu.address(), 256, PAGE)));
        KvCacheConfig kv = fullAttention(List.of("model.layers.0.attn", "model.layers.1.attn"), PAGE);
        RegistrationPlan over = RegistrationPlan.of(caches, kv, 1, "rdma", ONE_MIB);
        assertEquals(MemlockVerdict.EXCEEDS_LIMIT, over.memlockVerdict());
        assertEquals(4L << 20, over.hostBytes(), "GPU memory does not count against RLIMIT_MEMLOCK");
        assertEquals((4L << 20) + (64L << 20), over.totalBytes());
        assertEquals(List.of("cpu:0", "cuda:0"), over.locations());
        assertTrue(over.memlockWarning().orElseThrow().contains("ulimit -l unlimited"));
        assertFalse(over.locationProblem().isPresent());
        assertEquals(MemlockVerdict.WITHIN_LIMIT,
                RegistrationPlan.of(caches, kv, 1, "rdma", OptionalLong.of(8L << 20)).memlockVerdict());
        assertEquals(MemlockVerdict.UNLIMITED,
                RegistrationPlan.of(caches, kv, 1, "rdma", OptionalLong.of(-1)).memlockVerdict());
        assertEquals(MemlockVerdict.UNKNOWN,
                RegistrationPlan.of(caches, kv, 1, "rdma", OptionalLong.empty()).memlockVerdict());
        assertEquals(MemlockVerdict.NOT_APPLICABLE,
                RegistrationPlan.of(caches, kv, 1, "tcp", ONE_MIB).memlockVerdict());
    }

    @Test
    void initialisesTheEngineWithTheP2pHandshakeAndRecordsTheRpcPort() {
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine().withRpcPort(12345);
             MooncakeConnectorWorker w = consumer(engine, fullAttention(List.of("l.0"), PAGE))) {
            EngineCall init = engine.calls(EngineMethod.INITIALIZE).getFirst();
            assertEquals(List.of("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), init.args());
            assertEquals(12345, w.rpcPort());
            assertTrue(w.isKvConsumer());
            assertFalse(w.isKvProducer());
        }
    }

    @Test
    void engineInitialisationFailureRaisesTheDocumentedMessage() {
        try (ScriptedTransferEngine engine = new ScriptedTransferEngine()) {
            engine.script(EngineMethod.INITIALIZE).alwaysReturn(ErrorCodes.DEVICE_NOT_FOUND);
            EngineInitializationException e = assertThrows(EngineInitializationException.class,
                    () -> new MooncakeConnectorWorker(config(KvRole.KV_PRODUCER), engine,
                            fullAttention(List.of("l.0"), PAGE)));
            assertEquals("Mooncake Transfer Engine initialization failed.", e.getMessage());
            assertEquals(ErrorCodes.DEVICE_NOT_FOUND, e.returnCode());
            assertEquals("tcp", e.protocol());
        }
    }
}
