package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.engine.testing.EngineMethod;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** PP fan-out (spec §6.13) and losing the D peer mid-transfer (docs/reliability.md). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PipelineAndPeerLossTest {

    @Test
    void decodeWithOneStagePullsEveryPrefillStageEachSendingItsOwnLayers() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            // P: pp=2, stage 0 owns layers 0-1, stage 1 owns layers 2-3
            bed.registerLayers(n -> n.contains(".0.") || n.contains(".1."));
            PdTestbed.Node s0 = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, c -> c.pp(0, 2), b -> { });
            bed.registerLayers(n -> n.contains(".2.") || n.contains(".3."));
            PdTestbed.Node s1 = bed.node(KvRole.KV_PRODUCER, "P", 0, 1,
                    "127.0.0.1:" + s0.worker.bootstrapServerPort(), c -> c.pp(1, 2), b -> { });
            bed.registerLayers(n -> true);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            assertEquals(2, s0.worker.registration().regionCount());
            for (PdTestbed.Node s : new PdTestbed.Node[] {s0, s1}) {
                s.fill(6);
                s.step(announce("p1", "X"));
                s.step(finished("p1", "X", 6));
            }
            d.step(pull("d1", "X", "P", s0.bootstrapUrl(), 12));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && s0.finishedSending.contains("p1")
                    && s1.finishedSending.contains("p1"), Duration.ofSeconds(20), "both stages sent");
            PdTestbed.assertSameTpCopy(s0, 6, d, 12); // every layer: stage 0 wrote 0-1, stage 1 wrote 2-3
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            assertEquals(1, s0.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
            assertEquals(1, s1.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
            for (PdTestbed.Node s : new PdTestbed.Node[] {s0, s1}) {
                long[] dst = s.engine.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).getFirst().longs(2);
                int firstLayer = s == s0 ? 0 : 2;
                assertEquals(2, dst.length, "one descriptor per layer of the stage");
                for (int i = 0; i < 2; i++) {
                    assertEquals(d.block(firstLayer + i, 12).address(), dst[i], "stage writes only its layers");
                }
            }
        }
    }

    @Test
    void decodeLostMidTransferMakesPrefillFreeItsBlocksAfterTheAbortTimeout() {
        AtomicLong clock = new AtomicLong();
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 3));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, Duration.ofSeconds(10), "pull at P");
            d.worker.close();
            d.engine.close(); // D is gone: its memory is no longer a transfer target
            p.step(finished("p1", "X", 1));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 0, Duration.ofSeconds(10), "wave done");
            p.poll();
            assertTrue(p.finishedSending.isEmpty(), "a failed pull keeps P's blocks");
            clock.addAndGet(TimeUnit.SECONDS.toNanos(31));
            p.poll();
            assertEquals(Set.of("p1"), p.finishedSending);
            MooncakeKvConnectorStats st = p.worker.getKvConnectorStats().orElseThrow();
            assertEquals(1, st.numFailedTransfers());
            assertEquals(1, st.numKvExpiredReqs());
        }
    }
}
