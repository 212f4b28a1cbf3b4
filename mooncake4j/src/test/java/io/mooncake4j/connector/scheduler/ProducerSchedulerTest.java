package io.mooncake4j.connector.scheduler;

import static io.mooncake4j.connector.scheduler.SchedulerFixtures.TestRequest;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.consumerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.fullAttention;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.producerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.scheduler;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.MooncakeConnectorMetadata.ReqToSend;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** P side (kv_producer) of the scheduler: spec §5.3, §5.4, §5.6, §5.7. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ProducerSchedulerTest {

    private final MooncakeConnectorScheduler sched = scheduler(KvRole.KV_PRODUCER, fullAttention());

    @Test
    void remoteDecodeRequestMatchesNoExternalTokens() {
        TestRequest r = new TestRequest("p-1", 300, producerParams("xfer-a"));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 0));
        assertEquals(new MatchedTokens(0, false), sched.getNumNewMatchedTokens(r, 17));
    }

    @Test
    void allocationAnnouncesTransferWithEmptyBlocks() {
        TestRequest r = new TestRequest("p-1", 300, producerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {4, 5, 6}), 0);
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(Map.of("p-1", new ReqToSend("xfer-a", new int[0][])), meta.reqsToSend());
        assertEquals(0, meta.reqsToSend().get("p-1").localBlockIds().length);
        assertTrue(meta.reqsToRecv().isEmpty());
        assertTrue(meta.reqsNotProcessed().isEmpty());
        assertTrue(KvTransferParams.wrap(r.params).doRemoteDecode(), "P params are left as they are");
    }

    @Test
    void buildConnectorMetaClearsPendingSends() {
        sched.updateStateAfterAlloc(new TestRequest("p-1", 10, producerParams("xfer-a")), null, 0);
        sched.updateStateAfterAlloc(new TestRequest("p-2", 10, producerParams("xfer-b")), null, 0);
        MooncakeConnectorMetadata first = sched.buildConnectorMeta();
        assertEquals(List.of("p-1", "p-2"), List.copyOf(first.reqsToSend().keySet()), "insertion order");
        MooncakeConnectorMetadata second = sched.buildConnectorMeta();
        assertTrue(second.isEmpty());
    }

    @Test
    void allocationWithoutTransferIdIsNotTracked() {
        Map<String, Object> params = new HashMap<>(Map.of(KvTransferParams.DO_REMOTE_DECODE, true));
        sched.updateStateAfterAlloc(new TestRequest("p-1", 10, params), null, 0);
        params.put(KvTransferParams.TRANSFER_ID, "");
        sched.updateStateAfterAlloc(new TestRequest("p-2", 10, params), null, 0);
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void requestsWithoutParamsAreIgnored() {
        TestRequest none = new TestRequest("p-1", 10, null);
        TestRequest empty = new TestRequest("p-2", 10, new HashMap<>());
        for (TestRequest r : List.of(none, empty)) {
            assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 0));
            sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1}), 1);
            r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
            assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{1}}));
        }
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void lengthCappedRequestDelaysFreeAndShipsItsBlocks() {
        TestRequest r = new TestRequest("p-1", 40, producerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, null, 0);
        sched.buildConnectorMeta();
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        int[][] blocks = {{11, 12, 13}};
        RequestFinishedResult res = sched.requestFinished(r, blocks);
        assertTrue(res.delayFreeBlocks());
        assertNull(res.kvTransferParams(), "Mooncake never returns kv_transfer_params");
        blocks[0][0] = 99; // the scheduler kept its own copy
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(Map.of("p-1", new ReqToSend("xfer-a", new int[][] {{11, 12, 13}})), meta.reqsToSend());
        assertTrue(meta.reqsNotProcessed().isEmpty());
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void singleGroupRequestFinishedWrapsTheListIntoOneGroup() {
        TestRequest r = new TestRequest("p-1", 40, producerParams("xfer-a"));
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertTrue(sched.requestFinished(r, new int[] {3, 4}).delayFreeBlocks());
        assertArrayEquals(new int[][] {{3, 4}}, sched.buildConnectorMeta().reqsToSend().get("p-1").localBlockIds());
    }

    @Test
    void lengthCappedRequestWithoutAnyBlockIsFreedAtOnce() {
        TestRequest r = new TestRequest("p-1", 0, producerParams("xfer-a"));
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{}}));
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[0][]));
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void abortedOrStoppedRequestGoesToReqsNotProcessed() {
        TestRequest aborted = new TestRequest("p-1", 40, producerParams("xfer-a"));
        sched.updateStateAfterAlloc(aborted, null, 0);
        sched.buildConnectorMeta();
        aborted.status = RequestStatus.FINISHED_ABORTED;
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(aborted, new int[][] {{1, 2}}));
        TestRequest stopped = new TestRequest("p-2", 40, producerParams("xfer-b"));
        stopped.status = RequestStatus.FINISHED_STOPPED;
        assertFalse(sched.requestFinished(stopped, new int[][] {{5}}).delayFreeBlocks());
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(List.of("xfer-a", "xfer-b"), List.copyOf(meta.reqsNotProcessed()));
        assertTrue(meta.reqsToSend().isEmpty(), "no blocks are shipped for an aborted request");
        assertEquals(Set.of(), sched.buildConnectorMeta().reqsNotProcessed(), "reqs_not_processed is reset");
    }

    @Test
    void finishedRequestWithoutRemoteDecodeOrTransferIdIsFreedAtOnce() {
        Map<String, Object> noDecode = producerParams("xfer-a");
        noDecode.put(KvTransferParams.DO_REMOTE_DECODE, false);
        Map<String, Object> noId = producerParams("xfer-b");
        noId.remove(KvTransferParams.TRANSFER_ID);
        for (Map<String, Object> p : List.of(noDecode, noId)) {
            TestRequest r = new TestRequest("p-x", 10, p);
            r.status = RequestStatus.FINISHED_ABORTED;
            assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{1}}));
        }
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void producerRejectsRemotePrefillRequests() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        ConnectorException e = assertThrows(ConnectorException.class, () -> sched.getNumNewMatchedTokens(r, 0));
        assertTrue(e.getMessage().contains("kv_producer"), e.getMessage());
        assertThrows(ConnectorException.class, () -> sched.updateStateAfterAlloc(r, null, 0));
        assertThrows(ConnectorException.class, () -> sched.requestFinished(r, new int[0][]));
    }

    @Test
    void bothRoleRunsBothPaths() {
        MooncakeConnectorScheduler both = scheduler(KvRole.KV_BOTH, fullAttention());
        TestRequest p = new TestRequest("p-1", 10, producerParams("xfer-a"));
        TestRequest d = new TestRequest("d-1", 32, consumerParams("xfer-b"));
        both.updateStateAfterAlloc(p, null, 0);
        assertEquals(new MatchedTokens(32, true), both.getNumNewMatchedTokens(d, 0));
        both.updateStateAfterAlloc(d, KvCacheBlocks.ofUnhashed(new int[] {7, 8}), 32);
        TestRequest aborted = new TestRequest("p-2", 10, producerParams("xfer-c"));
        aborted.status = RequestStatus.FINISHED_ABORTED;
        both.requestFinished(aborted, new int[][] {{1}});
        MooncakeConnectorMetadata meta = both.buildConnectorMeta();
        assertEquals(Set.of("p-1"), meta.reqsToSend().keySet());
        assertEquals(Set.of("d-1"), meta.reqsToRecv().get(SchedulerFixtures.P_ENGINE).keySet());
        assertEquals(Set.of("xfer-c"), meta.reqsNotProcessed());
    }
}
