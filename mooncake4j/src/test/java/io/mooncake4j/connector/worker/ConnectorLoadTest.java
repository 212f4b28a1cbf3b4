package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.addPull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Many concurrent requests from several D workers to one P: all finish, every byte arrives,
 * P frees every block, the thread count does not depend on the number of pulls and returns to
 * its start value after close.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ConnectorLoadTest {

    private static final int DECODERS = 3;
    private static final int PER_DECODER = 20; // 60 requests, one P block each
    private static final int PER_STEP = 5;

    private static Set<String> threadNames() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .collect(Collectors.toSet());
    }

    @Test
    void manyConcurrentRequestsAcrossSeveralDecodersAllFinish() {
        int threadsBefore = Thread.activeCount();
        Set<String> namesBefore = threadNames();
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node[] ds = new PdTestbed.Node[DECODERS];
            for (int i = 0; i < DECODERS; i++) {
                ds[i] = bed.consumer("D" + i, 0, 1);
            }
            int total = DECODERS * PER_DECODER;
            int[] all = IntStream.range(0, total).toArray();
            p.fill(all);
            // P announces every request at allocation; D pulls arrive in steps of five per decoder,
            // interleaved with P finishing requests in steps of ten (some pulls wait on placeholders)
            MooncakeConnectorMetadata announce = new MooncakeConnectorMetadata();
            for (int r = 0; r < total; r++) {
                announce.addNewReq("p" + r, new int[0][], Map.of("transfer_id", "t" + r), false);
            }
            p.step(announce);
            int finishedUpTo = 0;
            for (int step = 0; step < PER_DECODER / PER_STEP; step++) {
                for (int di = 0; di < DECODERS; di++) {
                    MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
                    for (int k = 0; k < PER_STEP; k++) {
                        int r = di * PER_DECODER + step * PER_STEP + k;
                        addPull(m, "d" + r, "t" + r, "P", p.bootstrapUrl(), 63 - (r % PER_DECODER));
                    }
                    ds[di].step(m);
                }
                MooncakeConnectorMetadata fin = new MooncakeConnectorMetadata();
                for (int k = 0; k < total / (PER_DECODER / PER_STEP); k++, finishedUpTo++) {
                    int r = (finishedUpTo * 7) % total; // a permutation of 0..59 (7 and 60 are coprime)
                    fin.addNewReq("p" + r, new int[][] {{r}}, Map.of("transfer_id", "t" + r), false);
                }
                p.step(fin);
            }
            long midRunIoThreads = Thread.getAllStackTraces().keySet().stream()
                    .filter(t -> t.isAlive() && t.getName().startsWith("mooncake-d-io-")).count();
            bed.awaitAll(() -> {
                for (PdTestbed.Node d : ds) {
                    if (d.finishedRecving.size() < PER_DECODER) {
                        return false;
                    }
                }
                return p.finishedSending.size() == total;
            }, Duration.ofSeconds(60), "every request sent and received");
            for (int di = 0; di < DECODERS; di++) {
                assertTrue(ds[di].blocksWithLoadErrors.isEmpty());
                for (int k = 0; k < PER_DECODER; k++) {
                    int r = di * PER_DECODER + k;
                    PdTestbed.assertSameTpCopy(p, r, ds[di], 63 - (r % PER_DECODER));
                }
            }
            assertEquals(0, p.worker.diagnostics().pendingTransfers(), "all P blocks freed");
            assertEquals(DECODERS, midRunIoThreads, "one DEALER thread per decode worker, whatever the load");
            for (PdTestbed.Node d : ds) {
                assertEquals(0, d.worker.diagnostics().activePulls());
            }
        }
        assertEquals(List.of(), WorkerTestSupport.mooncakeThreadsAliveAfter(java.time.Duration.ofSeconds(10)));
        Set<String> extra = new HashSet<>(threadNames());
        extra.removeAll(namesBefore);
        assertTrue(Thread.activeCount() <= threadsBefore + 2, "threads left after close: " + extra);
    }
}
