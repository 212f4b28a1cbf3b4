package io.mooncake4j.connector.worker.plan;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransferTopologyTest {

    @Test
    void tpRatioIsPositiveWhenLocalHasMoreRanksAndNegativeOtherwise() {
        assertEquals(1, TransferTopology.tpRatio(2, 2));
        assertEquals(4, TransferTopology.tpRatio(8, 2));
        assertEquals(-4, TransferTopology.tpRatio(2, 8));
        assertEquals("Local tensor parallel size 6 is not divisible by remote tensor parallel size 4.",
                assertThrows(TransferPlanningException.class, () -> TransferTopology.tpRatio(6, 4)).getMessage());
        assertEquals("Remote tensor parallel size 6 is not divisible by local tensor parallel size 4.",
                assertThrows(TransferPlanningException.class, () -> TransferTopology.tpRatio(4, 6)).getMessage());
    }

    @Test
    void handshakeTargetsPairRanksBothWays() {
        assertArrayEquals(new int[] {1}, new TransferTopology(3, 4, false, false, 8).handshakeTargetRanks(2));
        assertArrayEquals(new int[] {2, 3}, new TransferTopology(1, 2, false, false, 8).handshakeTargetRanks(4));
        assertArrayEquals(new int[] {0}, new TransferTopology(0, 1, false, false, 8).handshakeTargetRanks(1));
    }

    @Test
    void pairingCheckNamesTheExpectedRanks() {
        TransferTopology p0 = new TransferTopology(0, 2, false, false, 8);
        assertNull(p0.pairingError(1, 4));
        assertEquals("This D tp_rank 2 is not paired with P tp_rank 0; expected one of [0, 1].", p0.pairingError(2, 4));
        assertEquals("This D tp_rank 1 is not paired with P tp_rank 0; expected one of [0].", p0.pairingError(1, 1));
    }

    @Test
    void kvIsReplicatedForMlaOrWhenRanksExceedHeads() {
        assertTrue(new TransferTopology(0, 2, true, false, 1).localReplicatesKvCache());
        assertTrue(new TransferTopology(0, 4, false, false, 2).localReplicatesKvCache());
        assertFalse(new TransferTopology(0, 2, false, false, 2).localReplicatesKvCache());
        assertEquals(0, new TransferTopology(0, 2, false, true, 2).headCountForResharding());
        assertEquals(2, new TransferTopology(0, 2, false, false, 2).headCountForResharding());
    }

    @Test
    void needSendCountsPairedRanksAndForeignConsumerStages() {
        assertEquals(2, TransferTopology.resolveNeedSend(2, 1, 1));
        assertEquals(6, TransferTopology.resolveNeedSend(2, 3, 1));
        assertEquals(2, TransferTopology.resolveNeedSend(2, 3, 3));
    }

    @Test
    void senderPlansFollowTheRatioRules() {
        // homogeneous
        assertEquals(new SenderTransferPlan(true, 0, 0, 64),
                TransferTopology.computeSenderTransferPlan(0, 2, 0, 2, 64, 64, false, 8));
        // P more ranks, sharded: slice at (rank % r) * Lp
        assertEquals(new SenderTransferPlan(true, 0, 3 * 64, 64),
                TransferTopology.computeSenderTransferPlan(7, 8, 1, 2, 64, 256, false, 8));
        // P more ranks, replicated (MLA: no head math): only rank % r == 0 writes, whole block
        assertEquals(new SenderTransferPlan(false, 0, 0, 64),
                TransferTopology.computeSenderTransferPlan(1, 2, 0, 1, 64, 64, true, 0));
        // D more ranks, sharded: source slice at (remote_rank % a) * Ld
        assertEquals(new SenderTransferPlan(true, 3 * 16, 0, 16),
                TransferTopology.computeSenderTransferPlan(0, 1, 3, 4, 64, 16, false, 8));
        // D more ranks, replicated producer: whole block
        assertEquals(new SenderTransferPlan(true, 0, 0, 64),
                TransferTopology.computeSenderTransferPlan(0, 1, 3, 4, 64, 64, true, 0));
        // head branch: H=2, P tp=4 replicated, D tp=1 sharded: rank 2 holds head 1 -> dst offset 1 head
        assertEquals(new SenderTransferPlan(true, 0, 32, 32),
                TransferTopology.computeSenderTransferPlan(2, 4, 0, 1, 32, 64, true, 2));
        assertEquals(new SenderTransferPlan(false, 0, 32, 32),
                TransferTopology.computeSenderTransferPlan(3, 4, 0, 1, 32, 64, true, 2));
    }

    @Test
    void invalidTopologiesAreRejected() {
        assertThrows(IllegalArgumentException.class, () -> new TransferTopology(2, 2, false, false, 8));
        assertThrows(IllegalArgumentException.class, () -> new TransferTopology(0, 1, false, false, 0));
    }
}
