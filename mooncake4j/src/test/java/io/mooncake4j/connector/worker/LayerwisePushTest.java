package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Layer-wise push: P writes each layer of a prefill chunk as {@code saveKvLayer} names
 * it, D's side and the wire are unchanged, and the correctness rules of whole-request sends hold.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LayerwisePushTest {

    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final int LAYERS = PdTestbed.MODEL.numLayers();

    private static PdTestbed.Node layerwiseProducer(PdTestbed bed) {
        return bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, c -> c.layerwisePush(true), b -> { });
    }

    /** This step's prefill chunk of P request {@code pReq}: prompt blocks [first, first+blocks) of total. */
    private static MooncakeConnectorMetadata chunk(String pReq, String transferId, int first, int total, boolean last,
            int... blocks) {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        m.addLayerwiseChunk(pReq, new MooncakeConnectorMetadata.LayerwiseChunk(transferId, new int[][] {blocks},
                first, total, last));
        return m;
    }

    private static void saveLayers(PdTestbed.Node p, int from, int to) {
        for (int l = from; l < to; l++) {
            p.worker.saveKvLayer(PdTestbed.MODEL.layerName(l));
        }
    }

    private static int writes(PdTestbed.Node p) {
        return p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE);
    }

    /**
     * P's writes whose destinations touch layers {@code [fromLayer, toLayer)} of D's blocks {@code dBlocks}. A
     * write is recorded once it returns, which may be after its bytes landed: count after P answered D (P
     * answers only once every write of the transfer returned), not when bytes are seen to land.
     */
    private static long writesInto(PdTestbed.Node p, PdTestbed.Node d, int fromLayer, int toLayer, int... dBlocks) {
        long page = d.page();
        return p.engine.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).stream().filter(c -> {
            long[] dst = c.longs(2);
            long[] len = c.longs(3);
            for (int i = 0; i < dst.length; i++) {
                for (int l = fromLayer; l < toLayer; l++) {
                    for (int b : dBlocks) {
                        long start = d.blockAddress(l, b);
                        if (dst[i] < start + page && start < dst[i] + len[i]) {
                            return true;
                        }
                    }
                }
            }
            return false;
        }).count();
    }

    /** Layers {@code [0, layers)} of D's block {@code dBlock} hold P's block {@code pBlock}. */
    private static boolean landed(PdTestbed.Node p, int pBlock, PdTestbed.Node d, int dBlock, int layers) {
        for (int l = 0; l < layers; l++) {
            if (p.block(l, pBlock).mismatch(d.block(l, dBlock)) != -1) {
                return false;
            }
        }
        return true;
    }

    @Test
    void layerwiseBytesEqualWholeRequestBytesAndFinishComesOnlyAfterTheLastLayer() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node whole = bed.consumer("DW", 0, 1);
            PdTestbed.Node lw = bed.consumer("DL", 0, 1);
            p.fill(1, 2, 3, 9);
            // the same P blocks under two transfers: X pushed whole (no chunk), Y layer by layer
            p.step(announce("pw", "X"));
            p.step(announce("pl", "Y"));
            whole.step(pull("dw", "X", "P", p.bootstrapUrl(), 5, 6, 7, 20));
            lw.step(pull("dl", "Y", "P", p.bootstrapUrl(), 5, 6, 7, 20));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 2, WAIT, "both pulls at P");
            p.step(chunk("pl", "Y", 0, 4, true, 1, 2, 3, 9));
            saveLayers(p, 0, LAYERS - 1);
            // saved layers that find a write of theirs running go together with the next one
            bed.awaitAll(() -> landed(p, 9, lw, 20, LAYERS - 1) && landed(p, 1, lw, 5, LAYERS - 1), WAIT,
                    "the first layers written");
            // P cannot have answered D yet: its FINISH needs the last layer
            lw.poll();
            assertFalse(lw.finishedRecving.contains("dl"), "D finished before P saved the last layer");
            saveLayers(p, LAYERS - 1, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> lw.finishedRecving.contains("dl"), WAIT, "dl received");
            // counted by what each write carried, now that P answered (see writesInto)
            long early = writesInto(p, lw, 0, LAYERS - 1, 5, 6, 7, 20);
            assertTrue(early >= 1 && early <= LAYERS - 1, "layer-wise writes of the first layers: " + early);
            assertEquals(1, writesInto(p, lw, LAYERS - 1, LAYERS, 5, 6, 7, 20), "the last layer in one more write");
            assertEquals(early + 1, writes(p), "no other write yet");
            p.step(finished("pw", "X", 1, 2, 3, 9));
            p.step(finished("pl", "Y", 1, 2, 3, 9));
            bed.awaitAll(() -> whole.finishedRecving.contains("dw") && p.finishedSending.equals(Set.of("pw", "pl")),
                    WAIT, "dw received, both sends finished");
            assertEquals(early + 2, writes(p), "request_finished of Y wrote nothing more");
            for (int b : new int[] {5, 6, 7, 20}) {
                for (int l = 0; l < LAYERS; l++) {
                    assertEquals(-1, whole.block(l, b).mismatch(lw.block(l, b)), "layer " + l + " block " + b);
                }
            }
            PdTestbed.assertSameTpCopy(p, 9, lw, 20);
            assertTrue(lw.failedRecving.isEmpty() && lw.blocksWithLoadErrors.isEmpty());
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }

    @Test
    void layersSavedWhileAWriteOfTheRequestRunsGoTogetherInTheNextWrite() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger writeCalls = new AtomicInteger();
        try (PdTestbed bed = new PdTestbed()) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(c -> {
                if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE && writeCalls.getAndIncrement() == 0) {
                    try {
                        release.await(30, TimeUnit.SECONDS); // holds layer 0's write
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }));
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "pull at P");
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, 1);
            bed.awaitAll(() -> writeCalls.get() == 1, WAIT, "layer 0's write running");
            saveLayers(p, 1, LAYERS);
            p.worker.waitForSave();
            p.worker.getFinished(); // runs on P's sender loop after the saves: they have been handled
            assertEquals(1, writeCalls.get(), "nothing queued behind the running write");
            release.countDown();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            assertEquals(2, writeCalls.get(), "every layer saved during the first write went in the second");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            assertTrue(d.failedRecving.isEmpty());
        } finally {
            release.countDown();
        }
    }

    /** An engine whose first write waits for {@code release}; {@code writeCalls} counts the writes. */
    private static void holdFirstWrite(PdTestbed bed, CountDownLatch release, AtomicInteger writeCalls) {
        bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(c -> {
            if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE && writeCalls.getAndIncrement() == 0) {
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }));
    }

    @Test
    void layersSavedWhileTheRequestsWriteRunsDoNotWakeTheSenderLoopPerLayer() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger writeCalls = new AtomicInteger();
        try (PdTestbed bed = new PdTestbed()) {
            holdFirstWrite(bed, release, writeCalls);
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "pull at P");
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, 1);
            bed.awaitAll(() -> writeCalls.get() == 1, WAIT, "layer 0's write running");
            long wakeups = p.worker.layerHookWakeups();
            assertTrue(wakeups >= 1, "layer 0 woke the loop: no write was in flight");
            saveLayers(p, 1, LAYERS);
            p.worker.waitForSave();
            assertEquals(wakeups, p.worker.layerHookWakeups(), "no wake-up per layer while the write runs");
            assertEquals(LAYERS + 1, p.worker.layerHookPosts(), "every hook handed over");
            p.worker.getFinished(); // runs the queued hooks on P's sender loop first
            assertEquals(1, writeCalls.get(), "nothing queued behind the running write");
            release.countDown();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            assertEquals(2, writeCalls.get(), "every layer saved during the first write went in the second");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            assertTrue(d.failedRecving.isEmpty());
        } finally {
            release.countDown();
        }
    }

    @Test
    void hooksQueuedBehindARunningWriteApplyToTheirOwnPassNotToTheNextStepsChunks() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger writeCalls = new AtomicInteger();
        try (PdTestbed bed = new PdTestbed()) {
            holdFirstWrite(bed, release, writeCalls);
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2); // p1's KV; p2's block 3 is written only in its own pass below
            p.step(announce("p1", "X"));
            p.step(announce("p2", "Y"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            d.step(pull("d2", "Y", "P", p.bootstrapUrl(), 6));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 2, WAIT, "both pulls at P");
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, 1);
            bed.awaitAll(() -> writeCalls.get() == 1, WAIT, "p1's layer 0 write running");
            saveLayers(p, 1, LAYERS);
            p.worker.waitForSave(); // p1's pass ends; its hooks wait for the running write's result
            p.step(chunk("p2", "Y", 0, 1, true, 3)); // the next step: its chunks come after those hooks
            release.countDown();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            assertFalse(d.finishedRecving.contains("d2"), "p2 saved no layer yet");
            p.fill(3);
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> d.finishedRecving.contains("d2"), WAIT, "d2 received");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            PdTestbed.assertSameTpCopy(p, 3, d, 6); // not pushed before its pass wrote it
            assertTrue(d.failedRecving.isEmpty());
        } finally {
            release.countDown();
        }
    }

    @Test
    void aPullArrivingAfterSomeLayersGetsThemAtOnceThenTheRest() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2, 3);
            p.step(announce("p1", "X"));
            p.step(chunk("p1", "X", 0, 3, true, 1, 2, 3));
            saveLayers(p, 0, 2);
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5, 6));
            bed.awaitAll(() -> writes(p) == 1, WAIT, "the saved layers in one write");
            assertEquals(2 * 3 / 3, p.engine.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).getFirst().longs(1).length,
                    "two layers, one coalesced run each");
            saveLayers(p, 2, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            p.step(finished("p1", "X", 1, 2, 3));
            bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "p1 finished sending");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            PdTestbed.assertSameTpCopy(p, 3, d, 6);
            assertEquals(Set.of("p1"), p.finishedSending, "finished once");
        }
    }

    @Test
    void chunkedPrefillSendsFinishedChunksAndPairsWithDsPrefixHit() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2, 3, 9);
            p.step(announce("p1", "X"));
            // D holds the first prompt block already: it pulls 3 of P's 4
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 6, 7, 20));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "pull at P");
            p.step(chunk("p1", "X", 0, 4, false, 1, 2));
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> landed(p, 2, d, 6, LAYERS), WAIT, "chunk 1 written layer by layer");
            d.poll();
            assertFalse(d.finishedRecving.contains("d1"), "not finished after a non-last chunk");
            p.step(chunk("p1", "X", 2, 4, true, 3, 9));
            p.worker.waitForSave(); // no saveKvLayer: the forward pass's end pushes every layer at once
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            long chunk1 = writesInto(p, d, 0, LAYERS, 6); // by what each write carried (see writesInto)
            assertTrue(chunk1 >= 1 && chunk1 <= LAYERS, "writes of chunk 1: " + chunk1);
            assertEquals(1, writesInto(p, d, 0, LAYERS, 7, 20), "chunk 2 in one write");
            assertEquals(chunk1 + 1, writes(p), "no other write");
            PdTestbed.assertSameTpCopy(p, 2, d, 6);
            PdTestbed.assertSameTpCopy(p, 3, d, 7);
            PdTestbed.assertSameTpCopy(p, 9, d, 20);
            assertTrue(d.failedRecving.isEmpty());
            p.step(finished("p1", "X", 1, 2, 3, 9));
            bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "p1 finished sending");
        }
    }

    @Test
    void aFailingLayerFailsTheRequestForDOnceAndNothingMoreIsWritten() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            bed.engines(() -> {
                ScriptedTransferEngine e = new ScriptedTransferEngine().copyData(true);
                e.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).failNthCall(2, -1);
                return e;
            });
            PdTestbed.Node p = layerwiseProducer(bed);
            bed.engines(() -> new ScriptedTransferEngine().copyData(true));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "pull at P");
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, 1);
            bed.awaitAll(() -> writes(p) == 1, WAIT, "layer 0 written");
            saveLayers(p, 1, 2); // the engine fails this one
            // D hears of the failure before the prefill ends: P answers once nothing of it is in flight
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 ended");
            assertEquals(Set.of(4, 5), d.blocksWithLoadErrors, "D hears the failure as a failed load");
            saveLayers(p, 2, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 0, WAIT, "pull ended");
            assertEquals(2, writes(p), "no layer written after the failed one");
            p.step(finished("p1", "X", 1, 2));
            // a second poll round: D reports the request once, P does not count it as sent
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 0, WAIT, "pull ended");
            d.finishedRecving.clear();
            d.poll();
            assertFalse(d.finishedRecving.contains("d1"), "reported once");
            d.blocksWithLoadErrors.clear();
            d.poll();
            assertTrue(d.blocksWithLoadErrors.isEmpty(), "load errors reported once");
            assertTrue(p.finishedSending.isEmpty(), "a failed pull does not count as sent");
        }
    }

    @Test
    void overTheTcpEngineLayerwiseBytesLand() {
        try (PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"))) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2, 3, 9);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 5, 6, 7, 20));
            p.step(chunk("p1", "X", 0, 4, false, 1, 2));
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            p.step(chunk("p1", "X", 2, 4, true, 3, 9));
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            p.step(finished("p1", "X", 1, 2, 3, 9));
            bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "p1 finished sending");
            PdTestbed.assertSameTpCopy(p, 1, d, 5);
            PdTestbed.assertSameTpCopy(p, 2, d, 6);
            PdTestbed.assertSameTpCopy(p, 3, d, 7);
            PdTestbed.assertSameTpCopy(p, 9, d, 20);
            assertTrue(d.failedRecving.isEmpty());
        }
    }

    @Test
    void requestFinishedBeforeTheLastChunkPushesTheRestWhole() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            p.step(chunk("p1", "X", 0, 2, false, 1));
            saveLayers(p, 0, 1);
            p.worker.waitForSave();
            // the embedder never files the last chunk: request_finished closes the layer-wise push
            p.step(finished("p1", "X", 1, 2));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"), WAIT,
                    "d1 received, p1 sent");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            assertTrue(d.failedRecving.isEmpty());
        }
    }

    @Test
    void aForwardPassWithoutLayerwiseChunksHandsNothingToTheSenderLoop() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = layerwiseProducer(bed);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(new MooncakeConnectorMetadata()); // a step with no prefill chunk (decode, or nothing)
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            assertEquals(0, p.worker.layerHookPosts(), "no hand-off per layer without a chunk");
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            assertEquals(LAYERS + 1, p.worker.layerHookPosts(), "each layer and the end of the pass");
            saveLayers(p, 0, LAYERS); // a later pass of a step without chunks
            p.worker.waitForSave();
            assertEquals(LAYERS + 1, p.worker.layerHookPosts(), "nothing after the chunk's waitForSave");
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            assertTrue(d.failedRecving.isEmpty());
        }
    }

    @Test
    void transferThreadsRunAtTheConfiguredNiceValue() {
        org.junit.jupiter.api.Assumptions.assumeTrue(io.mooncake4j.internal.sys.ThreadTuning.nice() == 0,
                "Linux, run at nice 0");
        java.util.concurrent.ConcurrentLinkedQueue<Integer> nices = new java.util.concurrent.ConcurrentLinkedQueue<>();
        try (PdTestbed bed = new PdTestbed()) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(c -> {
                if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE) {
                    nices.add(io.mooncake4j.internal.sys.ThreadTuning.nice());
                }
            }));
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null,
                    c -> c.layerwisePush(true).transferThreadNice(7), b -> { });
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 4, 5));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "pull at P");
            p.step(chunk("p1", "X", 0, 2, true, 1, 2));
            saveLayers(p, 0, LAYERS);
            p.worker.waitForSave();
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "d1 received");
            assertFalse(nices.isEmpty(), "writes seen");
            assertTrue(nices.stream().allMatch(n -> n == 7), "nice values of the writing threads: " + nices);
            assertEquals(0, io.mooncake4j.internal.sys.ThreadTuning.nice(), "the caller's own is unchanged");
            PdTestbed.assertSameTpCopy(p, 1, d, 4);
        }
    }
}
