package io.mooncake4j.connector.worker.plan;

import static io.mooncake4j.connector.worker.plan.PlanFixtures.d;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.groups;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.ids;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.list;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.region;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.worker.plan.PlanFixtures.Desc;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransferPlannerTest {

    private static final long P0 = 100_000;
    private static final long P1 = 200_000;
    private static final long D0 = 1_000_000;
    private static final long D1 = 2_000_000;

    private static TransferPlanner homogeneous() {
        return new TransferPlanner(new TransferTopology(0, 1, false, false, 8));
    }

    private static PreparedRegions twoLayers(TransferPlanner planner) {
        List<TransferRegion> local = List.of(region("model.layers.0.attn", 0, P0, 100, 100, 0),
                region("model.layers.1.attn", 1, P1, 100, 100, 0));
        List<TransferRegion> remote = List.of(region("model.layers.0.attn", 0, D0, 100, 100, 0),
                region("model.layers.1.attn", 1, D1, 100, 100, 0));
        PreparedRegions p = planner.prepare(local, remote, 0, 1, false);
        assertNull(p.error());
        return p;
    }

    private static List<Desc> planOne(TransferPlanner planner, PreparedRegions regions, int[][] local, int[][] remote) {
        DescriptorBuffer out = new DescriptorBuffer(1);
        assertNull(planner.planRequest("r", local, remote, regions, out));
        return list(out);
    }

    @Test
    void singleGroupPlansRegionsInOrderAndCoalescesContiguousRuns() {
        TransferPlanner planner = homogeneous();
        List<Desc> got = planOne(planner, twoLayers(planner), groups(ids(1, 2, 5)), groups(ids(7, 8, 9)));
        assertEquals(List.of(
                d(P0 + 100, D0 + 700, 200), d(P0 + 500, D0 + 900, 100),
                d(P1 + 100, D1 + 700, 200), d(P1 + 500, D1 + 900, 100)), got);
    }

    @Test
    void runsSplitWhenEitherSideIsNotContiguous() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        // gap on the destination side only
        assertEquals(List.of(d(P0 + 100, D0 + 400, 200), d(P0 + 300, D0 + 700, 100),
                        d(P1 + 100, D1 + 400, 200), d(P1 + 300, D1 + 700, 100)),
                planOne(planner, regions, groups(ids(1, 2, 3)), groups(ids(4, 5, 7))));
        // gap on the source side only, and a repeated id (difference 0) also splits
        assertEquals(List.of(d(P0 + 900, D0, 100), d(P0 + 1100, D0 + 100, 200), d(P0 + 1200, D0 + 300, 100),
                        d(P1 + 900, D1, 100), d(P1 + 1100, D1 + 100, 200), d(P1 + 1200, D1 + 300, 100)),
                planOne(planner, regions, groups(ids(9, 11, 12, 12)), groups(ids(0, 1, 2, 3))));
        // one long run
        assertEquals(List.of(d(P0, D0 + 1000, 500), d(P1, D1 + 1000, 500)),
                planOne(planner, regions, groups(ids(0, 1, 2, 3, 4)), groups(ids(10, 11, 12, 13, 14))));
    }

    @Test
    void descendingRunsOnBothSidesAreOneDescriptorFromTheirLowestBlocks() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        // vLLM's allocator hands a freed request's blocks out again in reverse order
        assertEquals(List.of(d(P0 + 200, D0 + 500, 400), d(P1 + 200, D1 + 500, 400)),
                planOne(planner, regions, groups(ids(5, 4, 3, 2)), groups(ids(8, 7, 6, 5))));
        // a descending run, then an ascending one: two descriptors; a turn does not join
        assertEquals(List.of(d(P0 + 100, D0 + 100, 300), d(P0 + 400, D0 + 400, 200),
                        d(P1 + 100, D1 + 100, 300), d(P1 + 400, D1 + 400, 200)),
                planOne(planner, regions, groups(ids(3, 2, 1, 4, 5)), groups(ids(3, 2, 1, 4, 5))));
        // descending on one side, ascending on the other: every pair on its own
        assertEquals(List.of(d(P0 + 300, D0 + 100, 100), d(P0 + 200, D0 + 200, 100), d(P0 + 100, D0 + 300, 100),
                        d(P1 + 300, D1 + 100, 100), d(P1 + 200, D1 + 200, 100), d(P1 + 100, D1 + 300, 100)),
                planOne(planner, regions, groups(ids(3, 2, 1)), groups(ids(1, 2, 3))));
        // after a prefix hit on D, the local tail pairs with D's blocks, descending too
        assertEquals(List.of(d(P0 + 700, D0 + 100, 200), d(P1 + 700, D1 + 100, 200)),
                planOne(planner, regions, groups(ids(20, 21, 8, 7)), groups(ids(2, 1))));
    }

    @Test
    void localTailIsSentWhenDecodeHadAPrefixHit() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        // P has 4 blocks, D asks for 2 -> P's last 2 blocks pair with D's 2
        assertEquals(List.of(d(P0 + 300, D0 + 800, 200), d(P1 + 300, D1 + 800, 200)),
                planOne(planner, regions, groups(ids(1, 2, 3, 4)), groups(ids(8, 9))));
    }

    @Test
    void fewerLocalThanRemoteBlocksFailsOnlyThatRequest() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        DescriptorBuffer out = new DescriptorBuffer();
        PlanErrors errors = new PlanErrors();
        planner.plan(List.of(
                ReadyRequest.of("a", groups(ids(1)), groups(ids(5, 6))),
                ReadyRequest.of("b", groups(ids(3)), groups(ids(4))),
                ReadyRequest.of("c", groups(ids(1), ids(2)), groups(ids(5)))), regions, out, errors);
        assertEquals(List.of("a", "c"), errors.errReqs());
        assertEquals("P num blocks less than D", errors.errMsg()); // the first message only
        assertEquals(List.of(d(P0 + 300, D0 + 400, 100), d(P1 + 300, D1 + 400, 100)), list(out));
    }

    @Test
    void groupCountMismatchIsReportedPerRequest() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        DescriptorBuffer out = new DescriptorBuffer();
        PlanErrors errors = new PlanErrors();
        planner.plan(List.of(ReadyRequest.of("x", groups(ids(1), ids(2)), groups(ids(5))),
                ReadyRequest.of("y", groups(ids(1)), groups(ids(5, 6)))), regions, out, errors);
        assertEquals(List.of("x", "y"), errors.errReqs());
        assertEquals("KV group count mismatch", errors.errMsg());
        assertTrue(out.isEmpty());
    }

    @Test
    void requestWithNoRemoteBlocksProducesNothingAndNoError() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        DescriptorBuffer out = new DescriptorBuffer();
        // all-empty remote groups are skipped before the group count check
        assertNull(planner.planRequest("r", groups(ids(1), ids(2)), groups(ids()), regions, out));
        assertNull(planner.planRequest("r", groups(ids(1)), groups(), regions, out));
        assertNull(planner.planRequest("r", groups(), groups(ids(), ids()), regions, out));
        assertTrue(out.isEmpty());
    }

    @Test
    void severalGroupsUseEachRegionsOwnGroupBlocks() {
        TransferPlanner planner = homogeneous();
        List<TransferRegion> local = List.of(region("l0", 0, P0, 100, 100, 0), region("l1", 1, P1, 50, 50, 1),
                region("l2", 2, 300_000, 100, 100, 0));
        List<TransferRegion> remote = List.of(region("l2", 2, 3_000_000, 100, 100, 0),
                region("l1", 1, D1, 50, 50, 1), region("l0", 0, D0, 100, 100, 0));
        PreparedRegions regions = planner.prepare(local, remote, 0, 1, false);
        assertNull(regions.error());
        // group 1 (e.g. sliding window) has only its tail blocks; group 0 all
        List<Desc> got = planOne(planner, regions, groups(ids(1, 2), ids(7, 8, 9)), groups(ids(3, 4), ids(5)));
        assertEquals(List.of(d(P0 + 100, D0 + 300, 200), d(P1 + 450, D1 + 250, 50),
                d(300_000 + 100, 3_000_000 + 300, 200)), got);
        // a group with no remote blocks contributes nothing
        got = planOne(planner, regions, groups(ids(1), ids(7)), groups(ids(3), ids()));
        assertEquals(List.of(d(P0 + 100, D0 + 300, 100), d(300_000 + 100, 3_000_000 + 300, 100)), got);
    }

    @Test
    void regionOfAMissingGroupAbortsTheWave() {
        TransferPlanner planner = homogeneous();
        List<TransferRegion> local = List.of(region("l0", 0, P0, 100, 100, 0), region("l1", 1, P1, 100, 100, 1));
        List<TransferRegion> remote = List.of(region("l0", 0, D0, 100, 100, 0), region("l1", 1, D1, 100, 100, 1));
        PreparedRegions regions = planner.prepare(local, remote, 0, 1, false);
        TransferPlanningException e = assertThrows(TransferPlanningException.class,
                () -> planner.planRequest("r", groups(ids(1)), groups(ids(2)), regions, new DescriptorBuffer()));
        assertEquals("Transfer region references a missing KV group.", e.getMessage());
    }

    @Test
    void kernelBlockExpansionMultipliesIdsAndKeepsRuns() {
        TransferPlanner planner = new TransferPlanner(new TransferTopology(0, 1, false, false, 8), 2, g -> false);
        List<TransferRegion> local = List.of(region("l0", 0, P0, 10, 10, 0));
        List<TransferRegion> remote = List.of(region("l0", 0, D0, 10, 10, 0));
        PreparedRegions regions = planner.prepare(local, remote, 0, 1, false);
        // logical [3,4]->[1,5]: kernel [6,7,8,9]->[2,3,10,11]
        assertEquals(List.of(d(P0 + 60, D0 + 20, 20), d(P0 + 80, D0 + 100, 20)),
                planOne(planner, regions, groups(ids(3, 4)), groups(ids(1, 5))));
        // contiguous logical ids make one run of 2 * 3 kernel blocks
        assertEquals(List.of(d(P0 + 20, D0 + 80, 60)),
                planOne(planner, regions, groups(ids(1, 2, 3)), groups(ids(4, 5, 6))));
    }

    @Test
    void kernelBlockExpansionWithoutCoalescingWritesEveryKernelBlock() {
        // P tp=2 -> D tp=1: not coalescable, so one descriptor per kernel block
        TransferPlanner planner = new TransferPlanner(new TransferTopology(1, 2, false, false, 8), 3, g -> false);
        PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, 10, 10, 0)),
                List.of(region("l0", 0, D0, 20, 20, 0)), 0, 1, false);
        assertNull(regions.error());
        assertEquals(List.of(d(P0 + 60, D0 + 300 + 10, 10), d(P0 + 70, D0 + 320 + 10, 10), d(P0 + 80, D0 + 340 + 10, 10),
                        d(P0 + 90, D0 + 360 + 10, 10), d(P0 + 100, D0 + 380 + 10, 10), d(P0 + 110, D0 + 400 + 10, 10)),
                planOne(planner, regions, groups(ids(2, 3)), groups(ids(5, 6))));
    }

    @Test
    void mambaGroupsStayInLogicalIdsAndDropNullBlocks() {
        TransferPlanner planner = new TransferPlanner(new TransferTopology(0, 1, false, true, 8), 17, g -> g == 1);
        List<TransferRegion> local = List.of(region("fa", 0, P0, 10, 10, 0), region("gdn", 1, P1, 500, 500, 1));
        List<TransferRegion> remote = List.of(region("fa", 0, D0, 10, 10, 0), region("gdn", 1, D1, 500, 500, 1));
        PreparedRegions regions = planner.prepare(local, remote, 0, 1, false);
        assertNull(regions.error());
        // FA logical 2 -> kernel 34..50 (one run of 17); GDN: null blocks (0) removed, slot 2 -> 4
        assertEquals(List.of(d(P0 + 340, D0 + 170, 170), d(P1 + 1000, D1 + 2000, 500)),
                planOne(planner, regions, groups(ids(2), ids(0, 2)), groups(ids(1), ids(0, 0, 4))));
    }

    @Test
    void producerWithMoreRanksWritesItsSliceOfEachConsumerBlock() {
        // P tp=2 -> D tp=1, P rank 1: dst offset = 1 * Lp, per-block descriptors
        TransferTopology topo = new TransferTopology(1, 2, false, false, 8);
        assertEquals(List.of(0), toList(topo.handshakeTargetRanks(1)));
        TransferPlanner planner = new TransferPlanner(topo);
        PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, 64, 64, 0)),
                List.of(region("l0", 0, D0, 128, 128, 0)), 0, 1, false);
        assertNull(regions.error());
        assertEquals(List.of(d(P0 + 64, D0 + 5 * 128 + 64, 64), d(P0 + 128, D0 + 6 * 128 + 64, 64)),
                planOne(planner, regions, groups(ids(1, 2)), groups(ids(5, 6))));
    }

    @Test
    void producerWithFewerRanksWritesTheConsumersSliceOfEachLocalBlock() {
        // P tp=2 -> D tp=4, P rank 0 pairs with D ranks [0,1]; D rank 1 takes the second half
        TransferTopology topo = new TransferTopology(0, 2, false, false, 8);
        assertEquals(List.of(0, 1), toList(topo.handshakeTargetRanks(4)));
        TransferPlanner planner = new TransferPlanner(topo);
        PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, 128, 128, 0)),
                List.of(region("l0", 0, D0, 64, 64, 0)), 1, 4, false);
        assertNull(regions.error());
        assertEquals(List.of(d(P0 + 3 * 128 + 64, D0 + 64, 64), d(P0 + 4 * 128 + 64, D0 + 128, 64)),
                planOne(planner, regions, groups(ids(3, 4)), groups(ids(1, 2))));
    }

    @Test
    void replicatedProducerHeadsAreReshardedOntoConsumerOffsets() {
        // GQA H=2, P tp=4 (replicated: 2 ranks per head) -> D tp=1: ranks 0 and 2 write, 1 and 3 skip
        long lp = 64;
        List<TransferRegion> remote = List.of(region("l0", 0, D0, 2 * lp, 2 * lp, 0));
        for (int rank = 0; rank < 4; rank++) {
            TransferPlanner planner = new TransferPlanner(new TransferTopology(rank, 4, false, false, 2));
            PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, lp, lp, 0)), remote, 0, 1, false);
            assertNull(regions.error());
            List<Desc> got = planOne(planner, regions, groups(ids(1, 2)), groups(ids(7, 8)));
            switch (rank) {
                case 0 -> assertEquals(List.of(d(P0 + lp, D0 + 7 * 2 * lp, lp), d(P0 + 2 * lp, D0 + 8 * 2 * lp, lp)), got);
                case 2 -> assertEquals(List.of(d(P0 + lp, D0 + 7 * 2 * lp + lp, lp),
                        d(P0 + 2 * lp, D0 + 8 * 2 * lp + lp, lp)), got);
                default -> assertEquals(List.of(), got);
            }
        }
    }

    @Test
    void shardedProducerHeadsAreReshardedOntoReplicatedConsumer() {
        // GQA H=2, P tp=1 -> D tp=4 (replicated on D): D rank 3 holds head 1 = second half of P's block
        long lp = 128;
        TransferTopology topo = new TransferTopology(0, 1, false, false, 2);
        assertEquals(List.of(0, 1, 2, 3), toList(topo.handshakeTargetRanks(4)));
        TransferPlanner planner = new TransferPlanner(topo);
        PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, lp, lp, 0)),
                List.of(region("l0", 0, D0, lp / 2, lp / 2, 0)), 3, 4, false);
        assertNull(regions.error());
        assertEquals(List.of(d(P0 + 2 * lp + lp / 2, D0 + 5 * lp / 2, lp / 2)),
                planOne(planner, regions, groups(ids(2)), groups(ids(5))));
    }

    @Test
    void mlaReplicatedCacheIsSentByOneProducerRankOnly() {
        long l = 576;
        for (int rank = 0; rank < 2; rank++) {
            TransferPlanner planner = new TransferPlanner(new TransferTopology(rank, 2, true, false, 1));
            PreparedRegions regions = planner.prepare(List.of(region("l0", 0, P0, l, l, 0)),
                    List.of(region("l0", 0, D0, l, l, 0)), 0, 1, false);
            assertNull(regions.error()); // no length check for a replicated producer without head math
            List<Desc> got = planOne(planner, regions, groups(ids(1, 2)), groups(ids(3, 4)));
            assertEquals(rank == 0 ? List.of(d(P0 + l, D0 + 3 * l, 2 * l)) : List.of(), got);
        }
    }

    @Test
    void virtualKvSplitSendsAllKDescriptorsOfALayerBeforeItsV() {
        TransferTopology topo = new TransferTopology(0, 1, false, false, 8, true);
        TransferPlanner planner = new TransferPlanner(topo);
        List<String> names = List.of("l0", "l1");
        List<TransferRegion> local = planner.regions(new long[] {P0, P1}, new long[] {100, 100}, new long[] {50, 50},
                names, new int[] {0, 1}, new int[] {0, 0}, n -> 0);
        List<TransferRegion> remote = planner.regions(new long[] {D0, D1}, new long[] {100, 100},
                new long[] {50, 50}, names, new int[] {0, 1}, null, n -> 0);
        assertEquals(List.of(region("l0", 0, P0, 100, 50, 0), region("l0", 0, P0 + 50, 100, 50, 0),
                region("l1", 1, P1, 100, 50, 0), region("l1", 1, P1 + 50, 100, 50, 0)), local);
        PreparedRegions regions = planner.prepare(local, remote, 0, 1, false);
        assertNull(regions.error());
        assertEquals(List.of(
                        d(P0 + 100, D0 + 300, 50), d(P0 + 200, D0 + 400, 50),
                        d(P0 + 50 + 100, D0 + 50 + 300, 50), d(P0 + 50 + 200, D0 + 50 + 400, 50),
                        d(P1 + 100, D1 + 300, 50), d(P1 + 200, D1 + 400, 50),
                        d(P1 + 50 + 100, D1 + 50 + 300, 50), d(P1 + 50 + 200, D1 + 50 + 400, 50)),
                planOne(planner, regions, groups(ids(1, 2)), groups(ids(3, 4))));
    }

    @Test
    void virtualKvSplitKeepsMlaAndMambaRegionsWhole() {
        TransferPlanner mamba = new TransferPlanner(new TransferTopology(0, 1, false, true, 8, true), 1, g -> g == 1);
        assertEquals(List.of(region("fa", 0, P0, 100, 50, 0), region("fa", 0, P0 + 50, 100, 50, 0),
                        region("gdn", 1, P1, 100, 100, 1)),
                mamba.regions(new long[] {P0, P1}, new long[] {100, 100}, new long[] {50, 100}, List.of("fa", "gdn"),
                        new int[] {0, 1}, new int[] {0, 1}, n -> 0));
        TransferPlanner mla = new TransferPlanner(new TransferTopology(0, 1, true, false, 1, true));
        assertEquals(List.of(region("l0", 0, P0, 100, 100, 0)), mla.regions(new long[] {P0}, new long[] {100},
                new long[] {100}, List.of("l0"), new int[] {0}, new int[] {0}, n -> 0));
    }

    @Test
    void planAppendsToTheBufferAndClearReusesIt() {
        TransferPlanner planner = homogeneous();
        PreparedRegions regions = twoLayers(planner);
        DescriptorBuffer out = new DescriptorBuffer(1);
        planner.plan(List.of(ReadyRequest.of("a", groups(ids(1)), groups(ids(2))),
                ReadyRequest.of("b", groups(ids(5)), groups(ids(6)))), regions, out, new PlanErrors());
        // requests in ready order, then regions
        assertEquals(List.of(d(P0 + 100, D0 + 200, 100), d(P1 + 100, D1 + 200, 100),
                d(P0 + 500, D0 + 600, 100), d(P1 + 500, D1 + 600, 100)), list(out));
        assertEquals(400, out.totalBytes());
        out.clear();
        assertTrue(out.isEmpty());
        assertEquals(0, out.totalBytes());
    }

    @Test
    void planningWithFailedRegionsIsAProgrammingError() {
        TransferPlanner planner = homogeneous();
        PreparedRegions failed = planner.prepare(List.of(region("a", 0, P0, 1, 1, 0)), List.of(), 0, 1, false);
        assertThrows(IllegalArgumentException.class,
                () -> planner.planRequest("r", groups(ids(1)), groups(ids(1)), failed, new DescriptorBuffer()));
    }

    private static List<Integer> toList(int[] a) {
        return java.util.Arrays.stream(a).boxed().toList();
    }
}
