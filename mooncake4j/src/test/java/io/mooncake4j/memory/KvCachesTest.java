package io.mooncake4j.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class KvCachesTest {

    @Test
    void llama8bFusedHasOneStoragePerLayerAnd64KiBPages() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            KvCaches kv = KvCaches.allocate(ModelPreset.LLAMA_3_8B, 1, 8, KvCacheLayout.FUSED, alloc::allocate);
            assertEquals(32, kv.tensorsByLayer().size());
            assertEquals(32, kv.storages().size());
            KvCacheTensor t = kv.tensorsByLayer().get("model.layers.0.self_attn.attn").getFirst();
            assertEquals(64 * 1024, t.blockStrideBytes());
            assertTrue(t.blockDense());
            assertEquals(32L * 8 * 64 * 1024, kv.totalBytes());
            assertEquals(64 * 1024, kv.config().specOf("model.layers.31.self_attn.attn").orElseThrow().pageSizeBytes());
        }
    }

    @Test
    void sharedLayoutCarvesEveryLayerFromOneStorage() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            KvCaches kv = KvCaches.allocate(ModelPreset.TINY, 1, 4, KvCacheLayout.SHARED, alloc::allocate);
            assertEquals(1, kv.storages().size());
            MemoryStorage s = kv.storages().getFirst();
            List<KvCacheTensor> layer1 = kv.tensorsByLayer().get("model.layers.1.self_attn.attn");
            assertEquals(s.address() + 4 * 16384L, layer1.getFirst().dataAddress());
            assertEquals(4L * 4 * 16384, s.byteSize());
        }
    }

    @Test
    void splitKvBlocksAreNotDenseAndYieldKAndVRegions() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            KvCaches kv = KvCaches.allocate(ModelPreset.TINY, 1, 10, KvCacheLayout.SPLIT_KV, alloc::allocate);
            KvCacheTensor t = kv.tensorsByLayer().get("model.layers.0.self_attn.attn").getFirst();
            assertFalse(t.blockDense());
            List<KvCacheTensor> regions = t.denseRegions();
            assertEquals(2, regions.size());
            assertEquals(8192, regions.get(0).blockStrideBytes());
            assertEquals(t.dataAddress() + 10 * 8192L, regions.get(1).dataAddress());
        }
    }

    @Test
    void mlaLayoutNeedsAnMlaModel() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> KvCaches.allocate(ModelPreset.LLAMA_3_8B, 1, 4, KvCacheLayout.MLA, alloc::allocate));
            assertTrue(e.getMessage().contains("not an MLA model"), e.getMessage());
            KvCaches kv = KvCaches.allocate(ModelPreset.DEEPSEEK_V2_LITE, 1, 4, KvCacheLayout.MLA, alloc::allocate);
            assertEquals(16L * 576 * 2, kv.tensorsByLayer().values().iterator().next().getFirst().blockStrideBytes());
        }
    }

    @Test
    void tensorOutsideItsStorageIsRejected() {
        MemoryStorage s = MemoryStorage.of(0x1000, 4096, "cpu:0");
        assertThrows(IllegalArgumentException.class, () -> KvCacheTensor.contiguous(s, 0x1000, 2, 4096));
        assertEquals(2, KvCacheTensor.contiguous(s, 0x1000, 2, 2048).numBlocks());
    }

    @Test
    void tensorParallelSplitsKvHeads() {
        assertEquals(64 * 1024, ModelPreset.LLAMA_3_8B.pageBytes(1));
        assertEquals(8 * 1024, ModelPreset.LLAMA_3_8B.pageBytes(8));
        assertEquals(8 * 1024, ModelPreset.LLAMA_3_8B.pageBytes(16)); // replicated beyond 8 heads
    }
}
