package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.testing.EngineCall;
import io.mooncake4j.engine.testing.EngineMethod;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** P sends, D receives, over real sockets and a byte-copying engine (spec §14). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EndToEndTransferTest {

    @Test
    void decodeReceivesEveryByteThePrefillSent() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2, 3, 9);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 5, 6, 7, 20));
            p.step(finished("p1", "X", 1, 2, 3, 9));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(20), "d1 received and p1 sent");
            PdTestbed.assertSameTpCopy(p, 1, d, 5);
            PdTestbed.assertSameTpCopy(p, 2, d, 6);
            PdTestbed.assertSameTpCopy(p, 3, d, 7);
            PdTestbed.assertSameTpCopy(p, 9, d, 20);
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            assertTrue(d.failedRecving.isEmpty());
            assertEquals(Set.of("p1"), p.finishedSending);
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }

    @Test
    void oneTransferCallCarriesTheWholeDescriptorListInSpecOrder() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2, 3, 9));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 5, 6, 8, 20));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(20), "d1 received");
            List<EngineCall> calls = p.engine.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE);
            assertEquals(1, calls.size());
            EngineCall c = calls.getFirst();
            assertEquals(d.engine.getLocalSegmentName(), c.string(0));
            // per layer (registration order): runs (1,2)->(5,6) coalesced, 3->8, 9->20
            long page = p.page();
            int layers = PdTestbed.MODEL.numLayers();
            long[] src = new long[3 * layers];
            long[] dst = new long[3 * layers];
            long[] len = new long[3 * layers];
            int i = 0;
            for (int l = 0; l < layers; l++) {
                long ps = p.block(l, 0).address();
                long ds = d.block(l, 0).address();
                src[i] = ps + page;
                dst[i] = ds + 5 * page;
                len[i++] = 2 * page;
                src[i] = ps + 3 * page;
                dst[i] = ds + 8 * page;
                len[i++] = page;
                src[i] = ps + 9 * page;
                dst[i] = ds + 20 * page;
                len[i++] = page;
            }
            org.junit.jupiter.api.Assertions.assertArrayEquals(src, c.longs(1), "src");
            org.junit.jupiter.api.Assertions.assertArrayEquals(dst, c.longs(2), "dst");
            org.junit.jupiter.api.Assertions.assertArrayEquals(len, c.longs(3), "len");
        }
    }

    @Test
    void statsReduceWithVllmKeysAfterTransfers() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 3, 4));
            bed.awaitAll(() -> p.finishedSending.contains("p1"), Duration.ofSeconds(20), "p1 sent");
            Map<String, Number> r = p.worker.getKvConnectorStats().orElseThrow().reduce();
            assertEquals(1, r.get(MooncakeKvConnectorStats.NUM_SUCCESSFUL_TRANSFERS).intValue());
            assertEquals(PdTestbed.MODEL.numLayers(), r.get(MooncakeKvConnectorStats.AVG_NUMBER_OF_DESCRIPTORS)
                    .doubleValue());
            assertEquals(0, r.get(MooncakeKvConnectorStats.NUM_FAILED_TRANSFERS).intValue());
            assertEquals(Set.of(MooncakeKvConnectorStats.NUM_SUCCESSFUL_TRANSFERS,
                    MooncakeKvConnectorStats.AVG_XFER_TIME_MS, MooncakeKvConnectorStats.P90_XFER_TIME_MS,
                    MooncakeKvConnectorStats.AVG_MB_PER_TRANSFER, MooncakeKvConnectorStats.THROUGHPUT_MB_S,
                    MooncakeKvConnectorStats.AVG_NUMBER_OF_DESCRIPTORS, MooncakeKvConnectorStats.NUM_FAILED_TRANSFERS,
                    MooncakeKvConnectorStats.NUM_FAILED_RECVS, MooncakeKvConnectorStats.NUM_KV_EXPIRED_REQS),
                    r.keySet());
            assertTrue(p.worker.getKvConnectorStats().isEmpty(), "cloneAndReset emptied the stats");
            assertTrue(d.worker.getKvConnectorStats().isEmpty(), "D recorded nothing");
        }
    }

    @Test
    void aConnectionWhosePullFinishedIsReusedForTheNextPull() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 3));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(20), "d1");
            p.step(announce("p2", "Y"));
            p.step(finished("p2", "Y", 2));
            d.step(pull("d2", "Y", "P", p.bootstrapUrl(), 4));
            bed.awaitAll(() -> d.finishedRecving.contains("d2"), Duration.ofSeconds(20), "d2");
            PdTestbed.assertSameTpCopy(p, 1, d, 3);
            PdTestbed.assertSameTpCopy(p, 2, d, 4);
            WorkerDiagnostics diag = d.worker.diagnostics();
            assertEquals(1, diag.dealerConnections() - diag.handshakeRetries(), "one connection for both pulls");
        }
    }

    @Test
    void closeLeavesNoMooncakeThread() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(20), "d1 received");
            assertTrue(WorkerTestSupport.liveMooncakeThreads().stream().anyMatch(n -> n.startsWith("mooncake-d-")));
            p.worker.close();
            d.worker.close();
            p.worker.close(); // idempotent
        }
        assertEquals(List.of(), WorkerTestSupport.mooncakeThreadsAliveAfter(java.time.Duration.ofSeconds(10)));
    }
}
