package io.mooncake4j.connector.scheduler;

import static io.mooncake4j.connector.scheduler.SchedulerFixtures.BOOTSTRAP;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.P_ENGINE;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.TestRequest;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.consumerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.fullAttention;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.producerParams;
import static io.mooncake4j.connector.scheduler.SchedulerFixtures.scheduler;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.PullReqMeta;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.testlog.LogCapture;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/** D side (kv_consumer) of the scheduler: spec §5.3, §5.4, §5.6, §5.7 and §15 #11, #14. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ConsumerSchedulerTest {

    private final MooncakeConnectorScheduler sched = scheduler(KvRole.KV_CONSUMER, fullAttention());

    @Test
    void remotePrefillMatchesPromptMinusLocallyComputedTokensAsynchronously() {
        TestRequest r = new TestRequest("d-1", 200, consumerParams("xfer-a"));
        assertEquals(new MatchedTokens(200, true), sched.getNumNewMatchedTokens(r, 0));
        assertEquals(new MatchedTokens(152, true), sched.getNumNewMatchedTokens(r, 48));
        assertEquals(new MatchedTokens(1, true), sched.getNumNewMatchedTokens(r, 199));
    }

    @Test
    void fullLocalPrefixHitMatchesNothing() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 64));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 80));
    }

    @Test
    void getNumNewMatchedTokensHasNoSideEffects() {
        Map<String, Object> params = consumerParams("xfer-a");
        Map<String, Object> before = Map.copyOf(params);
        TestRequest r = new TestRequest("d-1", 64, params);
        sched.getNumNewMatchedTokens(r, 0);
        sched.getNumNewMatchedTokens(r, 0);
        assertEquals(before, params);
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void requestsWithoutRemotePrefillMatchNothing() {
        Map<String, Object> off = consumerParams("xfer-a");
        off.put(KvTransferParams.DO_REMOTE_PREFILL, false);
        Map<String, Object> zero = consumerParams("xfer-b");
        zero.put(KvTransferParams.DO_REMOTE_PREFILL, 0L);
        for (Map<String, Object> p : List.of(off, zero, new HashMap<String, Object>())) {
            assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(new TestRequest("d-1", 64, p), 0));
        }
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(new TestRequest("d-2", 64, null), 0));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(new TestRequest("d-3", 0,
                consumerParams("xfer-c")), 0), "a prompt given only as embeddings has no token ids");
    }

    @Test
    void mambaModelsPullOneTokenLessThanThePrompt() {
        KvCacheConfig kv = KvCacheConfig.of(
                new KvCacheGroup(List.of("attn0"), KvCacheSpec.fullAttention(16, 16384)),
                new KvCacheGroup(List.of("gdn0"), KvCacheSpec.mamba(16, 8192)));
        MooncakeConnectorScheduler mamba = scheduler(KvRole.KV_CONSUMER, kv);
        assertTrue(mamba.hasMamba());
        assertEquals(new MatchedTokens(99, true),
                mamba.getNumNewMatchedTokens(new TestRequest("d-1", 100, consumerParams("x")), 0));
        assertEquals(new MatchedTokens(1, true),
                mamba.getNumNewMatchedTokens(new TestRequest("d-2", 1, consumerParams("y")), 0));
    }

    @Test
    void allocationRecordsPullIntoUnhashedBlocksAndClearsRemotePrefill() {
        TestRequest r = new TestRequest("d-1", 70, consumerParams("xfer-a"));
        int[] unhashed = {20, 21, 22, 23, 24};
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(unhashed), 70);
        assertFalse(KvTransferParams.wrap(r.params).doRemotePrefill());
        assertEquals(Boolean.FALSE, r.params.get(KvTransferParams.DO_REMOTE_PREFILL));
        unhashed[0] = -1; // the scheduler kept its own copy
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(Map.of(P_ENGINE, Map.of("d-1",
                new PullReqMeta("d-1", "xfer-a", new int[][] {{20, 21, 22, 23, 24}}, P_ENGINE, BOOTSTRAP))),
                meta.reqsToRecv());
        PullReqMeta pull = meta.reqsToRecv().get(P_ENGINE).get("d-1");
        assertEquals(Double.POSITIVE_INFINITY, pull.expireTime());
        assertEquals(0, pull.pullTasksCount());
        assertFalse(pull.failed());
        assertTrue(meta.reqsToSend().isEmpty());
        assertTrue(meta.reqsNotProcessed().isEmpty());
    }

    @Test
    void onlyOneTransferPerRequest() {
        TestRequest r = new TestRequest("d-1", 70, consumerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1, 2}), 70);
        sched.buildConnectorMeta();
        // A later step (e.g. after preemption) no longer loads remotely.
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 0));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1, 2}), 0);
        r.status = RequestStatus.FINISHED_ABORTED;
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{1, 2}}));
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void fullPrefixHitStillRegistersPullWithoutBlocksSoPFrees() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 64));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {5, 6, 7, 8}), 0);
        PullReqMeta pull = sched.buildConnectorMeta().reqsToRecv().get(P_ENGINE).get("d-1");
        assertEquals(0, pull.localBlockIds().length, "release-only pull");
        assertFalse(KvTransferParams.wrap(r.params).doRemotePrefill());
    }

    @Test
    void allocationWithoutBlocksObjectIsAllowedWhenNothingIsExternal() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, null, 0);
        assertEquals(1, sched.buildConnectorMeta().reqsToRecv().get(P_ENGINE).size());
    }

    @Test
    void allocationValidatesTheThreePullKeys() {
        try (LogCapture logs = LogCapture.start(MooncakeConnectorScheduler.class)) {
            allocateWithInvalidParams();
            assertEquals(4, logs.matching(Level.WARN, "Got invalid KVTransferParams").size(), logs.events().toString());
        }
    }

    private void allocateWithInvalidParams() {
        for (String key : List.of(KvTransferParams.REMOTE_ENGINE_ID, KvTransferParams.REMOTE_BOOTSTRAP_ADDR,
                KvTransferParams.TRANSFER_ID)) {
            Map<String, Object> params = consumerParams("xfer-" + key);
            params.remove(key);
            TestRequest r = new TestRequest("d-" + key, 64, params);
            sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1, 2, 3, 4}), 64);
            assertEquals(Boolean.FALSE, params.get(KvTransferParams.DO_REMOTE_PREFILL),
                    "do_remote_prefill is cleared even for invalid params (" + key + ")");
        }
        Map<String, Object> nullEngine = consumerParams("xfer-null");
        nullEngine.put(KvTransferParams.REMOTE_ENGINE_ID, null);
        sched.updateStateAfterAlloc(new TestRequest("d-null", 64, nullEngine), KvCacheBlocks.ofUnhashed(
                new int[] {1}), 16);
        assertTrue(sched.buildConnectorMeta().isEmpty(), "no invalid request is pulled");
    }

    @Test
    void nonStringBootstrapAddressIsNotTypeChecked() {
        Map<String, Object> params = consumerParams("xfer-a");
        params.put(KvTransferParams.REMOTE_BOOTSTRAP_ADDR, 8998L);
        sched.updateStateAfterAlloc(new TestRequest("d-1", 16, params), KvCacheBlocks.ofUnhashed(new int[] {3}), 16);
        assertEquals("8998", sched.buildConnectorMeta().reqsToRecv().get(P_ENGINE).get("d-1").remoteBootstrapAddr());
    }

    @Test
    void pullsAreGroupedByRemoteEngine() {
        Map<String, Object> other = consumerParams("xfer-c");
        other.put(KvTransferParams.REMOTE_ENGINE_ID, "prefill-engine-9");
        sched.updateStateAfterAlloc(new TestRequest("d-1", 16, consumerParams("xfer-a")),
                KvCacheBlocks.ofUnhashed(new int[] {1}), 16);
        sched.updateStateAfterAlloc(new TestRequest("d-2", 16, other), KvCacheBlocks.ofUnhashed(new int[] {2}), 16);
        sched.updateStateAfterAlloc(new TestRequest("d-3", 16, consumerParams("xfer-b")),
                KvCacheBlocks.ofUnhashed(new int[] {3}), 16);
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(List.of(P_ENGINE, "prefill-engine-9"), List.copyOf(meta.reqsToRecv().keySet()));
        assertEquals(List.of("d-1", "d-3"), List.copyOf(meta.reqsToRecv().get(P_ENGINE).keySet()));
        assertArrayEquals(new int[][] {{2}}, meta.reqsToRecv().get("prefill-engine-9").get("d-2").localBlockIds());
        assertEquals("xfer-b", meta.reqsToRecv().get(P_ENGINE).get("d-3").transferId());
        assertTrue(sched.buildConnectorMeta().isEmpty(), "build_connector_meta resets the pending pulls");
    }

    @Test
    void requestFinishedBeforeAllocationSendsReleaseOnlyPull() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        r.status = RequestStatus.FINISHED_ABORTED;
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{}}));
        assertEquals(Boolean.FALSE, r.params.get(KvTransferParams.DO_REMOTE_PREFILL));
        MooncakeConnectorMetadata meta = sched.buildConnectorMeta();
        assertEquals(Map.of(P_ENGINE, Map.of("d-1", new PullReqMeta("d-1", "xfer-a", new int[0][], P_ENGINE,
                BOOTSTRAP))), meta.reqsToRecv());
        // A second request_finished does nothing more.
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{}}));
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void requestFinishedBeforeAllocationWithIncompleteParamsIsRefusedNotCrashing() {
        Map<String, Object> params = consumerParams("xfer-a");
        params.remove(KvTransferParams.REMOTE_ENGINE_ID);
        TestRequest r = new TestRequest("d-1", 64, params);
        r.status = RequestStatus.FINISHED_ABORTED;
        try (LogCapture logs = LogCapture.start(MooncakeConnectorScheduler.class)) {
            assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[0][]));
            logs.assertLogged(Level.WARN, "Got invalid KVTransferParams");
        }
        assertEquals(Boolean.FALSE, params.get(KvTransferParams.DO_REMOTE_PREFILL));
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void requestFinishedAfterSuccessfulLoadFreesNow() {
        TestRequest r = new TestRequest("d-1", 64, consumerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1, 2, 3, 4}), 64);
        sched.buildConnectorMeta();
        r.status = RequestStatus.FINISHED_STOPPED;
        assertEquals(RequestFinishedResult.FREE_NOW, sched.requestFinished(r, new int[][] {{1, 2, 3, 4, 5}}));
        assertTrue(sched.buildConnectorMeta().isEmpty());
    }

    @Test
    void consumerRejectsRemoteDecodeRequests() {
        TestRequest r = new TestRequest("p-1", 64, producerParams("xfer-a"));
        assertEquals(MatchedTokens.NONE, sched.getNumNewMatchedTokens(r, 0));
        ConnectorException e = assertThrows(ConnectorException.class, () -> sched.updateStateAfterAlloc(r, null, 0));
        assertTrue(e.getMessage().contains("kv_consumer"), e.getMessage());
        r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
        assertThrows(ConnectorException.class, () -> sched.requestFinished(r, new int[][] {{1}}));
    }

    @Test
    void buildFailsLoudlyWhenRecordedParamsLoseARequiredKey() {
        TestRequest r = new TestRequest("d-1", 16, consumerParams("xfer-a"));
        sched.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(new int[] {1}), 16);
        r.params.remove(KvTransferParams.TRANSFER_ID);
        ConnectorException e = assertThrows(ConnectorException.class, sched::buildConnectorMeta);
        assertTrue(e.getMessage().contains("transfer_id"), e.getMessage());
        assertTrue(sched.buildConnectorMeta().isEmpty(), "the pending state was reset");
    }
}
