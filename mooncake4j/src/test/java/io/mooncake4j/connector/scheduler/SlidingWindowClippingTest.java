package io.mooncake4j.connector.scheduler;

import static io.mooncake4j.connector.scheduler.SchedulerFixtures.P_ENGINE;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.TestRequest;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.config;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.consumerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.fullAttention;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.hybrid;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.producerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.range;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.scheduler;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Sliding-window clipping (spec §5.1 {@code blocks_per_sw}, §5.5 {@code get_sw_clipped_blocks}). */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class SlidingWindowClippingTest {

    @Test
    void blocksPerSlidingWindowGroupIsCeilOfWindowOverBlockSizePlusOne() {
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, hybrid());
        assertTrue(s.isHmaRequired());
        assertArrayEquals(new int[] {0, 5, 8}, s.blocksPerSw());
    }

    @Test
    void slidingWindowGroupsKeepOnlyTheirTailAndFullAttentionGroupsEverything() {
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, hybrid());
        int[][] in = {range(100, 120), range(200, 220), range(300, 320)};
        int[][] out = s.getSwClippedBlocks(in);
        assertArrayEquals(new int[][] {range(100, 120), range(215, 220), range(312, 320)}, out);
        assertNotSame(in[0], out[0], "unclipped groups are copied too");
    }

    @Test
    void groupsShorterThanTheirWindowAreKeptWhole() {
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, hybrid());
        int[][] in = {range(0, 3), range(10, 15), range(20, 23)};
        assertArrayEquals(in, s.getSwClippedBlocks(in));
        assertArrayEquals(new int[][] {{}, {}, {}}, s.getSwClippedBlocks(new int[][] {{}, {}, {}}));
    }

    @Test
    void emptyInputGivesEmptyList() {
        assertEquals(0, scheduler(KvRole.KV_BOTH, hybrid()).getSwClippedBlocks(new int[0][]).length);
        assertEquals(0, scheduler(KvRole.KV_BOTH, fullAttention()).getSwClippedBlocks(new int[0][]).length);
    }

    @Test
    void fullAttentionOnlyConfigurationIsNeverClipped() {
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, fullAttention());
        assertFalse(s.isHmaRequired());
        int[][] in = {range(0, 50)};
        int[][] out = s.getSwClippedBlocks(in);
        assertArrayEquals(in, out);
        assertNotSame(in[0], out[0]);
        // Without HMA the group count is not checked (port note of §5.5).
        assertArrayEquals(new int[][] {{1}, {2}}, s.getSwClippedBlocks(new int[][] {{1}, {2}}));
    }

    @Test
    void disablingTheHybridManagerDisablesClipping() {
        MooncakeConnectorScheduler s = new MooncakeConnectorScheduler(config(KvRole.KV_BOTH, "e"), hybrid(), 16,
                MooncakeConnectorScheduler.Options.defaults().withDisableHybridKvCacheManager(true));
        assertFalse(s.isHmaRequired());
        int[][] in = {range(0, 20), range(0, 20), range(0, 20)};
        assertArrayEquals(in, s.getSwClippedBlocks(in));
    }

    @Test
    void windowThatIsAMultipleOfTheGroupBlockSizeStillKeepsOneExtraBlock() {
        KvCacheConfig kv = KvCacheConfig.of(
                new KvCacheGroup(List.of("f"), KvCacheSpec.fullAttention(32, 4096)),
                new KvCacheGroup(List.of("w"), KvCacheSpec.slidingWindow(32, 4096, 128)));
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, kv);
        assertArrayEquals(new int[] {0, 5}, s.blocksPerSw());
        assertArrayEquals(new int[][] {range(0, 9), range(4, 9)}, s.getSwClippedBlocks(
                new int[][] {range(0, 9), range(0, 9)}));
    }

    @Test
    void groupCountMismatchIsRejectedWhenClipping() {
        MooncakeConnectorScheduler s = scheduler(KvRole.KV_BOTH, hybrid());
        ConnectorException e = assertThrows(ConnectorException.class,
                () -> s.getSwClippedBlocks(new int[][] {{1}, {2}}));
        assertEquals("Expected 3 KV cache groups, got 2.", e.getMessage());
    }

    @Test
    void producerSendsAndConsumerReceivesTheSameClippedTails() {
        MooncakeConnectorScheduler p = scheduler(KvRole.KV_PRODUCER, hybrid());
        MooncakeConnectorScheduler d = scheduler(KvRole.KV_CONSUMER, hybrid());
        TestRequest pr = new TestRequest("p-1", 320, producerParams("xfer-a"));
        p.updateStateAfterAlloc(pr, null, 0);
        p.buildConnectorMeta();
        pr.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertTrue(p.requestFinished(pr, new int[][] {range(0, 20), range(20, 40), range(40, 60)}).delayFreeBlocks());
        int[][] sent = p.buildConnectorMeta().reqsToSend().get("p-1").localBlockIds();

        TestRequest dr = new TestRequest("d-1", 320, consumerParams("xfer-a"));
        assertEquals(new MatchedTokens(320, true), d.getNumNewMatchedTokens(dr, 0));
        d.updateStateAfterAlloc(dr, KvCacheBlocks.ofUnhashed(range(500, 520), range(600, 620), range(700, 720)), 320);
        int[][] received = d.buildConnectorMeta().reqsToRecv().get(P_ENGINE).get("d-1").localBlockIds();

        assertArrayEquals(new int[][] {range(0, 20), range(35, 40), range(52, 60)}, sent);
        assertArrayEquals(new int[][] {range(500, 520), range(615, 620), range(712, 720)}, received);
        for (int g = 0; g < 3; g++) {
            assertEquals(sent[g].length, received[g].length, "group " + g + " tails line up");
        }
    }
}
