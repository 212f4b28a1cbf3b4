package io.mooncake4j.connector.scheduler;

import static io.mooncake4j.connector.scheduler.SchedulerFixtures.TestRequest;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.config;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.fullAttention;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.producerParams;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The optional transfer-id collision guard (spec §16.1), on and off. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransferIdCollisionGuardTest {

    private static MooncakeConnectorScheduler producer(boolean guard) {
        return new MooncakeConnectorScheduler(config(KvRole.KV_PRODUCER, "p"), fullAttention(), 16,
                MooncakeConnectorScheduler.Options.defaults().withTransferIdCollisionGuard(guard));
    }

    @Test
    void guardIsOffByDefault() {
        assertFalse(MooncakeConnectorScheduler.Options.defaults().transferIdCollisionGuard());
    }

    @Test
    void withoutGuardBothRequestsWithOneTransferIdAreRecorded() {
        MooncakeConnectorScheduler s = producer(false);
        TestRequest a = new TestRequest("p-a", 10, producerParams("dup"));
        TestRequest b = new TestRequest("p-b", 10, producerParams("dup"));
        s.updateStateAfterAlloc(a, null, 0);
        s.updateStateAfterAlloc(b, null, 0);
        assertEquals(Set.of("p-a", "p-b"), s.buildConnectorMeta().reqsToSend().keySet());
        assertTrue(KvTransferParams.wrap(b.params).doRemoteDecode());
        assertEquals(Set.of(), s.activeTransferIds());
    }

    @Test
    void withGuardASecondRequestWithAnActiveTransferIdIsRefused() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("dup"));
        TestRequest b = new TestRequest("p-b", 10, producerParams("dup"));
        s.updateStateAfterAlloc(a, null, 0);
        s.updateStateAfterAlloc(b, null, 0);
        assertFalse(KvTransferParams.wrap(b.params).doRemoteDecode(), "the duplicate no longer sends");
        assertEquals(Set.of("p-a"), s.buildConnectorMeta().reqsToSend().keySet());
        b.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertEquals(RequestFinishedResult.FREE_NOW, s.requestFinished(b, new int[][] {{9}}));
        assertTrue(s.buildConnectorMeta().isEmpty(), "the refused request sends nothing when it finishes");
        assertEquals(Set.of("dup"), s.activeTransferIds());
    }

    @Test
    void initialEmptyEntryKeepsTheIdActiveAndTheBlocksEntryReleasesIt() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("x"));
        s.updateStateAfterAlloc(a, null, 0);
        s.buildConnectorMeta();
        assertEquals(Set.of("x"), s.activeTransferIds(), "the empty-blocks announcement keeps it active");
        a.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertTrue(s.requestFinished(a, new int[][] {{4, 5}}).delayFreeBlocks());
        assertEquals(Set.of("x"), s.activeTransferIds(), "released only once shipped");
        s.buildConnectorMeta();
        assertEquals(Set.of(), s.activeTransferIds());
        TestRequest reuse = new TestRequest("p-c", 10, producerParams("x"));
        s.updateStateAfterAlloc(reuse, null, 0);
        assertTrue(KvTransferParams.wrap(reuse.params).doRemoteDecode());
        assertEquals(Set.of("p-c"), s.buildConnectorMeta().reqsToSend().keySet());
    }

    @Test
    void abortShippedInReqsNotProcessedReleasesTheId() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("x"));
        s.updateStateAfterAlloc(a, null, 0);
        s.buildConnectorMeta();
        a.status = RequestStatus.FINISHED_ABORTED;
        s.requestFinished(a, new int[][] {{1}});
        assertEquals(Set.of("x"), s.activeTransferIds());
        MooncakeConnectorMetadata meta = s.buildConnectorMeta();
        assertEquals(Set.of("x"), meta.reqsNotProcessed());
        assertEquals(Set.of(), s.activeTransferIds());
        TestRequest reuse = new TestRequest("p-b", 10, producerParams("x"));
        s.updateStateAfterAlloc(reuse, null, 0);
        assertTrue(KvTransferParams.wrap(reuse.params).doRemoteDecode());
    }

    @Test
    void reallocationOfTheOwningRequestIsNotACollision() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("x"));
        s.updateStateAfterAlloc(a, null, 0);
        s.buildConnectorMeta();
        s.updateStateAfterAlloc(a, null, 0); // e.g. re-scheduled after preemption
        assertTrue(KvTransferParams.wrap(a.params).doRemoteDecode());
        assertEquals(Set.of("p-a"), s.buildConnectorMeta().reqsToSend().keySet());
    }

    @Test
    void abortOfAnUnallocatedDuplicateDoesNotCancelTheOwner() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("x"));
        s.updateStateAfterAlloc(a, null, 0);
        s.buildConnectorMeta();
        TestRequest dup = new TestRequest("p-b", 10, producerParams("x"));
        dup.status = RequestStatus.FINISHED_ABORTED; // aborted while still waiting, never allocated
        assertEquals(RequestFinishedResult.FREE_NOW, s.requestFinished(dup, new int[][] {{}}));
        assertTrue(s.buildConnectorMeta().reqsNotProcessed().isEmpty());
        assertEquals(Set.of("x"), s.activeTransferIds());
    }

    @Test
    void lengthCappedWithoutBlocksReleasesTheIdAtOnce() {
        MooncakeConnectorScheduler s = producer(true);
        TestRequest a = new TestRequest("p-a", 10, producerParams("x"));
        s.updateStateAfterAlloc(a, null, 0);
        a.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertFalse(s.requestFinished(a, new int[][] {{}}).delayFreeBlocks());
        assertEquals(Set.of(), s.activeTransferIds());
    }
}
