package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pattern;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Heterogeneous TP (spec §6.10 worked examples) end to end, every byte checked. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HeterogeneousTpTransferTest {

    @Test
    void twoPrefillRanksFillOneDecodeBlockSideBySide() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p0 = bed.producer("P", 0, 2, null);
            PdTestbed.Node p1 = bed.producer("P", 1, 2, "127.0.0.1:" + p0.worker.bootstrapServerPort());
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            int[] pBlocks = {3, 4, 10};
            int[] dBlocks = {7, 8, 30};
            for (PdTestbed.Node p : new PdTestbed.Node[] {p0, p1}) {
                p.fill(pBlocks);
                p.step(announce("p1", "X"));
                p.step(finished("p1", "X", pBlocks));
            }
            d.step(pull("d1", "X", "P", p0.bootstrapUrl(), dBlocks));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p0.finishedSending.contains("p1")
                    && p1.finishedSending.contains("p1"), Duration.ofSeconds(20), "both P ranks sent");
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            long half = p0.page();
            assertEquals(2 * half, d.page());
            for (int l = 0; l < PdTestbed.MODEL.numLayers(); l++) {
                for (int i = 0; i < dBlocks.length; i++) {
                    MemorySegment got = d.block(l, dBlocks[i]);
                    for (int rank = 0; rank < 2; rank++) {
                        for (long off = 0; off < half; off++) {
                            byte want = pattern(rank, l, pBlocks[i], off);
                            byte have = got.get(ValueLayout.JAVA_BYTE, rank * half + off);
                            if (want != have) {
                                assertEquals(want, have, "layer " + l + " block " + dBlocks[i] + " rank " + rank
                                        + " offset " + off);
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    void oneDecodeRankPerHalfOfAPrefillBlockAndPrefillFreesAfterBoth() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d0 = bed.consumer("D", 0, 2);
            PdTestbed.Node d1 = bed.consumer("D", 1, 2);
            int[] pBlocks = {1, 2, 5};
            int[] dBlocks = {9, 10, 11};
            p.fill(pBlocks);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", pBlocks));
            d0.step(pull("d1", "X", "P", p.bootstrapUrl(), dBlocks));
            bed.awaitAll(() -> d0.finishedRecving.contains("d1"), Duration.ofSeconds(20), "rank 0 received");
            p.poll();
            assertTrue(p.finishedSending.isEmpty(), "need_send is 2: one D rank is not enough");
            d1.step(pull("d1", "X", "P", p.bootstrapUrl(), dBlocks));
            bed.awaitAll(() -> d1.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(20), "rank 1 received and P freed");
            assertEquals(Set.of("p1"), p.finishedSending);
            long half = d0.page();
            for (PdTestbed.Node d : new PdTestbed.Node[] {d0, d1}) {
                for (int l = 0; l < PdTestbed.MODEL.numLayers(); l++) {
                    for (int i = 0; i < dBlocks.length; i++) {
                        MemorySegment got = d.block(l, dBlocks[i]);
                        for (long off = 0; off < half; off++) {
                            byte want = pattern(0, l, pBlocks[i], d.tpRank * half + off);
                            byte have = got.get(ValueLayout.JAVA_BYTE, off);
                            if (want != have) {
                                assertEquals(want, have, "D rank " + d.tpRank + " layer " + l + " offset " + off);
                            }
                        }
                    }
                }
            }
        }
    }
}
