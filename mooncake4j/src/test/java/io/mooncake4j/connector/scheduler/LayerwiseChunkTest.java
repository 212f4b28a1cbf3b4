package io.mooncake4j.connector.scheduler;

import static io.mooncake4j.connector.scheduler.SchedulerFixtures.TestRequest;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.fullAttention;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.hybrid;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.producerParams;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata.LayerwiseChunk;
import io.mooncake4j.memory.KvCacheConfig;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The prefill chunks P's scheduler files for layer-wise push (block size 16). */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class LayerwiseChunkTest {

    private static MooncakeConnectorScheduler scheduler(boolean on, KvCacheConfig kv) {
        MooncakeConnectorConfig c = MooncakeConnectorConfig.builder().kvRole(KvRole.KV_PRODUCER).engineId("p")
                .layerwisePush(on).build();
        return new MooncakeConnectorScheduler(c, kv, 16);
    }

    @Test
    void chunksCarryTheBlocksEachStepCompletesAndTheLastOneTheTail() {
        MooncakeConnectorScheduler s = scheduler(true, fullAttention());
        TestRequest r = new TestRequest("r", 70, producerParams("T")); // 5 blocks, the last partial
        int[][] blocks = {{10, 11, 12, 13, 14}};
        s.recordPrefillChunk(r, blocks, 16, 40); // a local hit of one block, then 24 tokens: blocks 0..1 complete
        LayerwiseChunk c1 = s.buildConnectorMeta().layerwiseChunks().get("r");
        assertEquals("T", c1.transferId());
        assertArrayEquals(new int[] {10, 11}, c1.blockIds()[0], "the first chunk includes the prefix hit");
        assertEquals(0, c1.firstBlock());
        assertEquals(5, c1.totalBlocks());
        assertFalse(c1.last());
        s.recordPrefillChunk(r, blocks, 40, 47); // block 2 still partial: nothing filed
        assertTrue(s.buildConnectorMeta().layerwiseChunks().isEmpty());
        s.recordPrefillChunk(r, blocks, 47, 70);
        LayerwiseChunk c2 = s.buildConnectorMeta().layerwiseChunks().get("r");
        assertArrayEquals(new int[] {12, 13, 14}, c2.blockIds()[0]);
        assertEquals(2, c2.firstBlock());
        assertTrue(c2.last());
    }

    @Test
    void offOrOnAHybridCacheNoChunkIsFiled() {
        for (MooncakeConnectorScheduler s : new MooncakeConnectorScheduler[] {scheduler(false, fullAttention()),
                scheduler(true, hybrid())}) {
            int groups = s == null ? 1 : s.blocksPerSw().length;
            int[][] blocks = new int[groups][];
            java.util.Arrays.setAll(blocks, g -> new int[] {1, 2});
            s.recordPrefillChunk(new TestRequest("r", 32, producerParams("T")), blocks, 0, 32);
            assertTrue(s.buildConnectorMeta().layerwiseChunks().isEmpty());
            assertFalse(s.layerwisePush());
        }
    }
}
