package io.mooncake4j.connector.worker.plan;

import static io.mooncake4j.connector.worker.plan.PlanFixtures.d;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.groups;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.ids;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.list;
import static io.mooncake4j.connector.worker.plan.PlanFixtures.region;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransferRegionsTest {

    @Test
    void expandBuildsOneRegionPerEntryInOrder() {
        List<TransferRegion> r = TransferRegions.expand(new long[] {10, 20}, new long[] {4, 8}, new long[] {4, 6},
                List.of("a", "b"), new int[] {0, 1}, new int[] {0, 1}, false, g -> false);
        assertEquals(List.of(region("a", 0, 10, 4, 4, 0), region("b", 1, 20, 8, 6, 1)), r);
        assertEquals(List.of(region("a", 0, 10, 4, 4, 0)), TransferRegions.expand(new long[] {10}, new long[] {4},
                new long[] {4}, List.of("a"), new int[] {0}, null, false, g -> false));
    }

    @Test
    void missingGroupIndicesFallBackToTheLocalLayerMap() {
        Map<String, Integer> byLayer = Map.of("a", 2);
        List<TransferRegion> r = TransferRegions.getTransferRegions(new long[] {10, 20}, new long[] {4, 4},
                new long[] {4, 4}, List.of("a", "unknown"), new int[] {0, 1}, new int[0],
                n -> byLayer.getOrDefault(n, 0), false, g -> false);
        assertEquals(List.of(region("a", 0, 10, 4, 4, 2), region("unknown", 1, 20, 4, 4, 0)), r);
    }

    @Test
    void unequalMetadataArraysAreRejectedWithVllmsMessage() {
        TransferPlanningException e = assertThrows(TransferPlanningException.class,
                () -> TransferRegions.expand(new long[] {1, 2}, new long[] {4, 4}, new long[] {4}, List.of("a", "b"),
                        new int[] {0, 1}, null, false, g -> false));
        assertEquals("Mooncake transfer regions require matching metadata lengths, got base_addrs=2, block_lens=2, "
                + "kv_block_lens=1, layer_names=2, layer_indices=2.", e.getMessage());
        e = assertThrows(TransferPlanningException.class,
                () -> TransferRegions.expand(new long[] {1}, new long[] {4}, new long[] {4}, List.of("a"),
                        new int[] {0}, new int[] {0, 0}, false, g -> false));
        assertTrue(e.getMessage().startsWith("Mooncake transfer regions require matching group metadata lengths"),
                e.getMessage());
    }

    @Test
    void alignmentPairsByLayerNameAndOccurrenceInLocalOrder() {
        // per-head regions: two occurrences of each layer name; consumer lists them in another order
        List<TransferRegion> local = List.of(region("l0", 0, 100, 8, 8, 0), region("l0", 0, 108, 8, 8, 0),
                region("l1", 1, 200, 8, 8, 0), region("l1", 1, 208, 8, 8, 0));
        List<TransferRegion> remote = List.of(region("l1", 1, 2000, 8, 8, 0), region("l0", 0, 1000, 8, 8, 0),
                region("l1", 1, 2008, 8, 8, 0), region("l0", 0, 1008, 8, 8, 0), region("extra", 9, 9000, 8, 8, 0));
        TransferRegions.Alignment a = TransferRegions.align(local, remote, false);
        assertNull(a.error());
        assertEquals(local, a.local());
        assertEquals(List.of(remote.get(1), remote.get(3), remote.get(0), remote.get(2)), a.remote());
    }

    @Test
    void producerPipelineStageSendsOnlyItsOwnLayersIntoTheMatchingConsumerLayers() {
        // P has PP=2; this stage owns layers 2 and 3; D (PP=1) registered all four
        List<TransferRegion> local = List.of(region("model.layers.2.attn", 2, 300, 10, 10, 0),
                region("model.layers.3.attn", 3, 400, 10, 10, 0));
        List<TransferRegion> remote = List.of(region("model.layers.0.attn", 0, 1000, 10, 10, 0),
                region("model.layers.1.attn", 1, 2000, 10, 10, 0), region("model.layers.2.attn", 2, 3000, 10, 10, 0),
                region("model.layers.3.attn", 3, 4000, 10, 10, 0));
        TransferPlanner planner = new TransferPlanner(new TransferTopology(0, 1, false, false, 8));
        PreparedRegions p = planner.prepare(local, remote, 0, 1, TransferPlanner.allowPartialLayers(1, 2));
        assertNull(p.error());
        DescriptorBuffer out = new DescriptorBuffer();
        assertNull(planner.planRequest("r", groups(ids(1)), groups(ids(2)), p, out));
        assertEquals(List.of(d(310, 3020, 10), d(410, 4020, 10)), list(out));
    }

    @Test
    void consumerWithSeveralStagesLetsTheProducerSkipLayersTheConsumerStageLacks() {
        assertTrue(TransferPlanner.allowPartialLayers(2, 1));
        assertFalse(TransferPlanner.allowPartialLayers(2, 2));
        assertFalse(TransferPlanner.allowPartialLayers(1, 2));
        List<TransferRegion> local = List.of(region("l0", 0, 100, 10, 10, 0), region("l1", 1, 200, 10, 10, 0));
        List<TransferRegion> remote = List.of(region("l1", 1, 2000, 10, 10, 0));
        TransferRegions.Alignment a = TransferRegions.align(local, remote, true);
        assertNull(a.error());
        assertEquals(List.of(local.get(1)), a.local());
        assertEquals(remote, a.remote());
        a = TransferRegions.align(local, remote, false);
        assertEquals("Mooncake producer registered layer has no matching consumer occurrence: l0 occurrence 0.",
                a.error());
        assertEquals(List.of(), a.local());
    }

    @Test
    void missingOccurrenceOfAKnownLayerFailsEvenWithPartialLayers() {
        List<TransferRegion> local = List.of(region("l0", 0, 100, 8, 8, 0), region("l0", 0, 108, 8, 8, 0));
        List<TransferRegion> remote = List.of(region("l0", 0, 1000, 8, 8, 0));
        assertEquals("Mooncake producer registered layer has no matching consumer occurrence: l0 occurrence 1.",
                TransferRegions.align(local, remote, true).error());
    }

    @Test
    void layerIndexAndGroupIndexMismatchesAreReported() {
        assertEquals("Mooncake registered layer index mismatch for l0: producer=0, consumer=5.",
                TransferRegions.align(List.of(region("l0", 0, 1, 1, 1, 0)), List.of(region("l0", 5, 1, 1, 1, 0)),
                        false).error());
        assertEquals("Mooncake registered group index mismatch for l0: producer=0, consumer=1.",
                TransferRegions.align(List.of(region("l0", 0, 1, 1, 1, 0)), List.of(region("l0", 0, 1, 1, 1, 1)),
                        false).error());
    }

    @Test
    void asymmetricLengthValidationMessages() {
        List<TransferRegion> one = List.of(region("l0", 0, 0, 64, 64, 0));
        assertEquals("Mooncake asymmetric TP requires matching KV region counts between producer and consumer.",
                TransferRegions.validateAsymmetricRegionLengths(one, List.of(), 1, 1, false, 8));
        assertEquals("Mooncake KV region length mismatch for homogeneous TP at region 0: local=64, remote=32.",
                TransferRegions.validateAsymmetricRegionLengths(one, List.of(region("l0", 0, 0, 32, 32, 0)), 2, 2,
                        false, 8));
        assertEquals("Mooncake destination KV region length does not match the producer TP ratio at region 0: "
                        + "local=64, remote=64, tp_ratio=2.",
                TransferRegions.validateAsymmetricRegionLengths(one, one, 2, 1, false, 8));
        assertEquals("Mooncake source KV region length does not match the consumer TP ratio at region 0: "
                        + "local=64, remote=64, tp_ratio=-2.",
                TransferRegions.validateAsymmetricRegionLengths(one, one, 1, 2, false, 8));
        assertNull(TransferRegions.validateAsymmetricRegionLengths(one, List.of(region("l0", 0, 0, 128, 128, 0)), 2, 1,
                false, 8));
        // head counts clamp TP sizes: H=2, P tp=4 -> D tp=2 behaves as homogeneous
        assertNull(TransferRegions.validateAsymmetricRegionLengths(one, one, 4, 2, true, 2));
        // replicated producer without head math: no check at all
        assertNull(TransferRegions.validateAsymmetricRegionLengths(one, List.of(region("l0", 0, 0, 1, 1, 0)), 2, 1,
                true, 0));
        assertEquals("Local tensor parallel size 3 is not divisible by remote tensor parallel size 2.",
                TransferRegions.validateAsymmetricRegionLengths(one, one, 3, 2, false, 8));
    }

    @Test
    void headReshardingRejectsPaddedPagesAndNvfp4OnlyWhenHeadsAreResharded() {
        List<TransferRegion> local = List.of(region("mamba", 0, 0, 64, 64, 1), region("l1", 1, 0, 64, 64, 0));
        Map<String, LayerLayout> layouts = Map.of("mamba", new LayerLayout(false, true, false),
                "l1", new LayerLayout(true, true, false));
        TransferTopology tp2 = new TransferTopology(0, 2, false, false, 8);
        assertEquals("Mooncake KV-head re-sharding is not supported for padded KV pages (layer l1).",
                TransferRegions.validateHeadReshardingLayout(tp2, 1, local, layouts::get));
        assertEquals("Mooncake KV-head re-sharding is not supported for NVFP4 KV cache.",
                TransferRegions.validateHeadReshardingLayout(tp2, 4, local,
                        n -> n.equals("l1") ? new LayerLayout(true, false, true) : null));
        // same effective TP (both clamp to H=2), MLA, or Mamba models: nothing to check
        assertNull(TransferRegions.validateHeadReshardingLayout(new TransferTopology(0, 4, false, false, 2), 2, local,
                layouts::get));
        assertNull(TransferRegions.validateHeadReshardingLayout(new TransferTopology(0, 2, true, false, 1), 1, local,
                layouts::get));
        assertNull(TransferRegions.validateHeadReshardingLayout(new TransferTopology(0, 2, false, true, 8), 1, local,
                layouts::get));
        assertNull(TransferRegions.validateHeadReshardingLayout(tp2, 1, local, n -> LayerLayout.PLAIN_ATTENTION));
        // prepare runs it before the length validation
        TransferPlanner planner = new TransferPlanner(tp2);
        assertEquals("Mooncake KV-head re-sharding is not supported for padded KV pages (layer l1).",
                planner.prepare(List.of(region("l1", 1, 0, 64, 64, 0)), List.of(region("l1", 1, 0, 64, 64, 0)), 0, 1,
                        false, layouts::get).error());
    }

    @Test
    void prepareReportsAlignmentBeforeValidation() {
        TransferPlanner planner = new TransferPlanner(new TransferTopology(0, 2, false, false, 8));
        PreparedRegions p = planner.prepare(List.of(region("l0", 0, 0, 64, 64, 0)),
                List.of(region("l0", 0, 0, 64, 64, 0)), 0, 1, false);
        assertFalse(p.ok());
        assertTrue(p.error().startsWith("Mooncake destination KV region length does not match"), p.error());
        p = planner.prepare(List.of(region("l0", 0, 0, 64, 64, 0)), List.of(region("l0", 1, 0, 64, 64, 0)), 0, 1,
                false);
        assertEquals("Mooncake registered layer index mismatch for l0: producer=0, consumer=1.", p.error());
    }

    @Test
    void outOfBoundsPlansAbortTheWaveOnlyWhenBlocksAreSent() {
        TransferPlanner planner = new TransferPlanner(new TransferTopology(1, 2, false, false, 8));
        // unvalidated pairs: P tp=2 -> D tp=1 with a D block too small for rank 1's slice
        PreparedRegions p = planner.preparePairs(List.of(region("l0", 0, 0, 64, 64, 0)),
                List.of(region("l0", 0, 0, 64, 64, 0)), 0, 1);
        DescriptorBuffer out = new DescriptorBuffer();
        assertNull(planner.planRequest("r", groups(ids(1)), groups(ids()), p, out));
        TransferPlanningException e = assertThrows(TransferPlanningException.class,
                () -> planner.planRequest("r", groups(ids(1)), groups(ids(2)), p, out));
        assertEquals("Destination transfer region exceeds remote KV block size.", e.getMessage());

        TransferPlanner p0 = new TransferPlanner(new TransferTopology(0, 1, false, false, 8));
        PreparedRegions small = p0.preparePairs(List.of(region("l0", 0, 0, 64, 64, 0)),
                List.of(region("l0", 0, 0, 64, 64, 0)), 1, 2);
        e = assertThrows(TransferPlanningException.class,
                () -> p0.planRequest("r", groups(ids(1)), groups(ids(2)), small, out));
        assertEquals("Computed source transfer region exceeds local KV block size.", e.getMessage());

        PreparedRegions mixed = p0.preparePairs(List.of(region("l0", 0, 0, 64, 64, 0)),
                List.of(region("l0", 0, 0, 64, 64, 1)), 0, 1);
        e = assertThrows(TransferPlanningException.class,
                () -> p0.planRequest("r", groups(ids(1)), groups(ids(2)), mixed, out));
        assertEquals("Aligned Mooncake transfer regions must belong to the same KV group.", e.getMessage());

        TransferPlanner tp2 = new TransferPlanner(new TransferTopology(0, 2, false, false, 8));
        PreparedRegions indivisible = tp2.preparePairs(List.of(region("l0", 0, 0, 64, 64, 0)),
                List.of(region("l0", 0, 0, 64, 64, 0)), 0, 3);
        assertNull(indivisible.plan(0));
        assertNull(tp2.planRequest("r", groups(ids(1)), groups(ids()), indivisible, out));
        e = assertThrows(TransferPlanningException.class,
                () -> tp2.planRequest("r", groups(ids(1)), groups(ids(2)), indivisible, out));
        assertEquals("Remote tensor parallel size 3 is not divisible by local tensor parallel size 2.", e.getMessage());
    }
}
