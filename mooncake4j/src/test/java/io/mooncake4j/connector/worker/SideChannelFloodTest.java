package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.metadataFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.send.KvSender;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Placeholders a peer can make P create are bounded: metadata naming transfer ids P does not know. Each creates a placeholder and a
 * pending wait; past the per-peer or total cap P answers ERROR at once (counted), creates nothing,
 * and serves again once the waits have timed out.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SideChannelFloodTest {

    private static MooncakeXferMetadata unknownIds(PdTestbed.Node d, int port, String prefix, int n) {
        Map<String, MooncakeXferMetadata.ReqBlocks> rb = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
            rb.put(prefix + "-d" + i, PdTestbed.blocks(prefix + "-x" + i, i % 8));
        }
        MooncakeXferMetadata m = metadataFor(d, rb);
        return new MooncakeXferMetadata(m.remoteHostname(), port, m.remoteTpSize(), m.remoteTpRank(), m.reqBlocks(),
                m.kvCachesBaseAddr(), m.blockLens(), m.kvBlockLens(), m.registeredLayerNames(),
                m.registeredLayerIndices(), m.registeredGroupIndices(), m.remotePpSize());
    }

    private static void assertLimitError(MooncakeXferResponse r, String what) {
        assertEquals(MooncakeXferResponseStatus.ERROR, r.status(), what);
        assertTrue(r.errMsg().contains("P side-channel limit"), r.errMsg());
        assertTrue(r.errMsg().contains(what), r.errMsg());
    }

    @Test
    void unknownTransferIdFloodIsCappedPerPeerAndInTotalWithAnErrorReply() {
        AtomicLong clock = new AtomicLong();
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(1))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get)
                    .sideChannelLimits(SideChannelLimits.DEFAULTS.withMaxPending(8, 20)));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (PdTestbed.RawDealer a = PdTestbed.RawDealer.to(p);
                    PdTestbed.RawDealer b = PdTestbed.RawDealer.to(p)) {
                a.send(unknownIds(d, 1001, "a1", 8)); // peer A: 8 pending, its whole share
                bed.awaitAll(() -> p.worker.diagnostics().pendingTransfers() == 8, Duration.ofSeconds(10), "A held");
                a.send(unknownIds(d, 1001, "a2", 1));
                assertLimitError(a.recv(), "per-peer limit of 8");
                b.send(unknownIds(d, 1002, "b1", 8)); // peer B: 16 in all
                bed.awaitAll(() -> p.worker.diagnostics().pendingTransfers() == 16, Duration.ofSeconds(10), "B held");
                b.send(unknownIds(d, 1003, "c1", 5)); // peer C: its own share is free but the total is not
                assertLimitError(b.recv(), "above the limit of 20");
                WorkerDiagnostics diag = p.worker.diagnostics();
                assertEquals(2, diag.limitRejections());
                assertEquals(16, diag.pendingTransfers(), "a refused pull creates no placeholder");
                assertEquals(2, diag.activeSends());
                // the held pulls time out after the abort timeout; their placeholders expire with P's clock
                MooncakeXferResponse ta = a.recv();
                MooncakeXferResponse tb = b.recv();
                assertEquals(KvSender.READY_TIMEOUT_MESSAGE, ta.errMsg());
                assertEquals(KvSender.READY_TIMEOUT_MESSAGE, tb.errMsg());
                clock.addAndGet(TimeUnit.SECONDS.toNanos(2));
                bed.awaitAll(() -> p.worker.diagnostics().pendingTransfers() == 0, Duration.ofSeconds(10),
                        "placeholders expired");
                a.send(unknownIds(d, 1001, "a3", 8)); // the per-peer share is free again
                bed.awaitAll(() -> p.worker.diagnostics().pendingTransfers() == 8, Duration.ofSeconds(10), "A again");
            }
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after-flood", 1, 2);
            assertEquals(2, p.worker.diagnostics().limitRejections());
        }
    }
}
