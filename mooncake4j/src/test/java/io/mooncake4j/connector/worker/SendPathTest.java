package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.blocks;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.metadataFor;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.send.KvSender;
import io.mooncake4j.engine.testing.EngineMethod;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The producer's send path (spec §6.7, §6.9, §6.11, §6.12) and its §15 fixes. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SendPathTest {

    private static final long S = 1_000_000_000L;

    @Test
    void earlyDecodePullWaitsOnAPlaceholderUntilPrefillIsReady() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(20))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(4);
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 11));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, Duration.ofSeconds(10), "pull at P");
            assertEquals(1, p.worker.diagnostics().pendingTransfers(), "placeholder created by the pull");
            assertTrue(d.finishedRecving.isEmpty());
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 4));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(10), "transfer after readiness");
            PdTestbed.assertSameTpCopy(p, 4, d, 11);
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }

    @Test
    void readyTimeoutFinishesWithErrReqsAndDecodeReportsTheFailedBlocks() {
        try (PdTestbed bed = new PdTestbed()) { // abort timeout 2 s
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(metadataFor(d, Map.of("d0", blocks("never", 1, 2))));
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d0"), r.errReqs());
                assertNull(r.okReqs());
                assertEquals("Timeout waiting for P side ready.", r.errMsg());
            }
            d.step(pull("d1", "Y", "P", p.bootstrapUrl(), 7, 8));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(20), "failed load finishes");
            assertEquals(Set.of(7, 8), d.blocksWithLoadErrors);
            assertTrue(d.failedRecving.isEmpty(), "full-attention model: failures are per block");
            assertEquals(1, d.worker.getKvConnectorStats().orElseThrow().numFailedRecvs());
        }
    }

    @Test
    void engineFailureIsReportedAsErrReqsAndPKeepsTheBlocksUntilExpiry() {
        AtomicLong clock = new AtomicLong();
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.engine.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).alwaysReturn(-1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2));
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(metadataFor(d, Map.of("d1", blocks("X", 3, 4))));
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d1"), r.errReqs());
                assertEquals("Mooncake transfer engine returned -1", r.errMsg());
            }
            p.poll();
            assertTrue(p.finishedSending.isEmpty(), "a failed pull does not free P's blocks");
            assertEquals(1, p.worker.diagnostics().pendingTransfers());
            clock.addAndGet(31 * S);
            p.poll();
            assertEquals(Set.of("p1"), p.finishedSending);
            MooncakeKvConnectorStats st = p.worker.getKvConnectorStats().orElseThrow();
            assertEquals(1, st.numFailedTransfers());
            assertEquals(1, st.numKvExpiredReqs());
        }
    }

    @Test
    void planningErrorAndEngineErrorAreJoinedInErrMsg() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.engine.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).alwaysReturn(-1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1)); // one block, D asks for two: "P num blocks less than D"
            p.step(announce("p2", "Y"));
            p.step(finished("p2", "Y", 2));
            Map<String, MooncakeXferMetadata.ReqBlocks> rb = new LinkedHashMap<>();
            rb.put("d1", blocks("X", 3, 4));
            rb.put("d2", blocks("Y", 5));
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(metadataFor(d, rb));
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(Set.of("d1", "d2"), Set.copyOf(r.errReqs()));
                assertEquals("P num blocks less than D; Mooncake transfer engine returned -1", r.errMsg());
            }
        }
    }

    @Test
    void expiryFreesReadyBlocksAfterTheAbortTimeoutOnTheInjectedClock() {
        AtomicLong clock = new AtomicLong(1_000 * S);
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(480))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2));
            p.poll(); // runs on the sender loop after the recording
            clock.addAndGet(479 * S);
            p.poll();
            assertTrue(p.finishedSending.isEmpty());
            clock.addAndGet(2 * S);
            p.poll();
            assertEquals(Set.of("p1"), p.finishedSending);
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
            assertEquals(1, p.worker.getKvConnectorStats().orElseThrow().numKvExpiredReqs());
        }
    }

    /**
     * The expiry queue: a hold that nobody pulls expires once (reported once, counted once), a request
     * that was sent is never expired later, and a request aborted before its deadline neither.
     */
    @Test
    void expiryFiresOnceAndNeverForARequestThatFinishedOrWasAborted() throws Exception {
        AtomicLong clock = new AtomicLong(1_000 * S);
        try (io.mooncake4j.testlog.LogCapture logs = io.mooncake4j.testlog.LogCapture.start(KvSender.class);
                PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(2);
            p.step(announce("held", "H"));
            p.step(finished("held", "H", 1));
            p.step(announce("sent", "S"));
            p.step(finished("sent", "S", 2));
            p.step(announce("aborted", "A"));
            p.step(finished("aborted", "A", 3));
            MooncakeConnectorMetadata abort = new MooncakeConnectorMetadata();
            abort.setReqsNotProcessed(Set.of("A"));
            p.step(abort);
            d.step(pull("d-sent", "S", "P", p.bootstrapUrl(), 5));
            List<String> reported = new java.util.ArrayList<>();
            // P's results are read here only (not through the testbed's polling), to count each report
            WorkerTestSupport.await(() -> {
                reported.addAll(p.worker.getTransferResults().finishedSending());
                d.poll();
                return reported.contains("sent") && d.finishedRecving.contains("d-sent");
            }, "the pulled request sent");
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            for (int i = 0; i < 4; i++) { // across the deadline and well past it
                clock.addAndGet(20 * S);
                reported.addAll(p.worker.getTransferResults().finishedSending());
            }
            assertEquals(List.of("sent", "held"), reported, "each reported once; the aborted one never");
            assertEquals(1, p.worker.getKvConnectorStats().orElseThrow().numKvExpiredReqs());
            assertEquals(1, logs.matching(org.slf4j.event.Level.WARN, "timed out after 30 seconds").size());
            logs.assertLogged(org.slf4j.event.Level.WARN, "Request held timed out after 30 seconds without being sent");
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
            KvSender sender = p.worker.senderOrNull();
            assertEquals(0, (int) java.util.concurrent.CompletableFuture.supplyAsync(sender::expiryEntries,
                    p.worker.senderLoop()).get(10, TimeUnit.SECONDS), "the queues hold nothing any more");
        }
    }

    @Test
    void requestRemovedBetweenReadinessAndSendingIsReportedAsAnError() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(metadataFor(d, Map.of("d1", blocks("X", 3))));
                bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, Duration.ofSeconds(10), "pull at P");
                MooncakeConnectorMetadata m = finished("p1", "X", 1);
                m.setReqsNotProcessed(Set.of("X")); // blocks recorded, then removed in the same step
                p.step(m);
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d1"), r.errReqs(), "vLLM drops it from both lists (spec §15 #1)");
                assertEquals(KvSender.EXPIRED_BEFORE_SENDING, r.errMsg());
            }
            assertEquals(0, p.worker.backgroundErrorCount());
        }
    }

    @Test
    void entriesMissingFromTheSendTableNeverBreakTheLoop() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            MooncakeConnectorMetadata m = finished("ghost", "never-announced", 1, 2);
            m.setReqsNotProcessed(Set.of("also-unknown"));
            PdTestbed.addPull(m, "unused", "t", "P", "http://127.0.0.1:1"); // ignored on a producer
            p.step(m);
            p.fill(3);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 3));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 9));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(10), "the following transfer");
            assertTrue(p.finishedSending.contains("ghost"), "an unknown finished request is freed at once");
            PdTestbed.assertSameTpCopy(p, 3, d, 9);
            assertEquals(0, p.worker.backgroundErrorCount());
        }
    }

    @Test
    void placeholdersOfEarlyPullsExpireToo() {
        AtomicLong clock = new AtomicLong();
        try (PdTestbed bed = new PdTestbed()) { // abort timeout 2 s
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(metadataFor(d, Map.of("d1", blocks("orphan", 3))));
                assertEquals(READY_TIMEOUT, dealer.recv().errMsg());
            }
            assertEquals(1, p.worker.diagnostics().pendingTransfers(), "placeholder still there");
            clock.addAndGet(3 * S);
            p.poll();
            WorkerDiagnostics diag = p.worker.diagnostics();
            assertEquals(0, diag.pendingTransfers());
            assertEquals(1, diag.placeholdersExpired());
            assertTrue(p.finishedSending.isEmpty(), "a placeholder has no P request to free");
        }
    }

    private static final String READY_TIMEOUT = "Timeout waiting for P side ready.";

    @Test
    void unpairedDecodeRankGetsAnError() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            MooncakeXferMetadata good = metadataFor(d, Map.of("d1", blocks("X", 3)));
            MooncakeXferMetadata rank1 = new MooncakeXferMetadata(good.remoteHostname(), good.remotePort(), 1, 1,
                    good.reqBlocks(), good.kvCachesBaseAddr(), good.blockLens(), good.kvBlockLens(),
                    good.registeredLayerNames(), good.registeredLayerIndices(), good.registeredGroupIndices(), 1);
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(rank1);
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.ERROR, r.status());
                assertEquals("This D tp_rank 1 is not paired with P tp_rank 0; expected one of [0].", r.errMsg());
            }
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }
}
