package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MooncakeKvConnectorStatsTest {

    private static final long MIB = 1 << 20;

    private static Map<String, Number> expected(Number n, Number avgMs, Number p90Ms, Number avgMb, Number tput,
            Number descs, long ft, long fr, long ex) {
        Map<String, Number> m = new LinkedHashMap<>();
        m.put("Num successful transfers", n);
        m.put("Avg xfer time (ms)", avgMs);
        m.put("P90 xfer time (ms)", p90Ms);
        m.put("Avg MB per transfer", avgMb);
        m.put("Throughput (MB/s)", tput);
        m.put("Avg number of descriptors", descs);
        m.put("Num failed transfers", ft);
        m.put("Num failed recvs", fr);
        m.put("Num KV expired reqs", ex);
        return m;
    }

    @Test
    void emptyStatsReduceToIntegerZerosWithVllmKeysInOrder() {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        assertTrue(s.isEmpty());
        Map<String, Number> r = s.reduce();
        assertEquals(expected(0L, 0L, 0L, 0L, 0L, 0L, 0, 0, 0), r);
        assertEquals(List.copyOf(expected(0L, 0L, 0L, 0L, 0L, 0L, 0, 0, 0).keySet()), List.copyOf(r.keySet()));
    }

    @Test
    void reduceOfFourTransfersMatchesHandComputedFigures() {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        s.recordTransfer(0.1, MIB, 1);
        s.recordTransfer(0.2, 2 * MIB, 2);
        s.recordTransfer(0.4, 4 * MIB, 4);
        s.recordTransfer(0.3, 3 * MIB, 3);
        // mean 0.25 s; P90: index 3*0.9 = 2.7 between 0.3 and 0.4 -> 0.37 s; 10 MiB / 4; 10 MiB / 1.0 s; 10/4 descs
        assertEquals(expected(4L, 250.0, 370.0, 2.5, 10.0, 2.5, 0, 0, 0), s.reduce());
    }

    @Test
    void reduceRoundsLikePythonAndReportsFailures() {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        s.recordTransfer(0.00123456, 1572864, 7); // 1.23456 ms -> 1.235; 1.5 MiB; 1.5 / 0.00123456 s -> 1215.008
        s.recordFailedTransfer();
        s.recordFailedTransfer();
        s.recordFailedRecv();
        s.recordKvExpiredReq();
        s.recordKvExpiredReq();
        s.recordKvExpiredReq();
        assertEquals(expected(1L, 1.235, 1.235, 1.5, 1215.008, 7.0, 2, 1, 3), s.reduce());
    }

    @Test
    void zeroTotalTimeGivesZeroThroughput() {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        s.recordTransfer(0.0, MIB, 3);
        assertEquals(0.0, s.reduce().get("Throughput (MB/s)"));
    }

    @Test
    void reduceOfAThousandTransfersMatchesNumpy() {
        // reference: numpy 2.4 on the same inputs (mean/sum pairwise, percentile linear, Python round)
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        for (int i = 0; i < 1000; i++) {
            s.recordTransfer((i % 37 + 1) * 0.000731, (i * 7919L % 100000) * 4096, i % 13 + 1);
        }
        assertEquals(expected(1000L, 13.876, 24.854, 194.689, 14030.821, 7.0, 0, 0, 0), s.reduce());
    }

    @Test
    void numpyHelpersMatchReferenceValues() {
        double[] d = new double[1000];
        for (int i = 0; i < d.length; i++) {
            d[i] = (i % 37 + 1) * 0.000731;
        }
        assertEquals(13.875842000000002, MooncakeKvConnectorStats.numpySum(d)); // numpy: x.sum()
        assertEquals(0.024854, MooncakeKvConnectorStats.numpyPercentileLinear(d, 90));
        assertEquals(9.1, MooncakeKvConnectorStats.numpyPercentileLinear(new double[] {10, 1, 2, 3, 4, 5, 6, 7, 8, 9},
                90), 1e-12);
        assertEquals(5.0, MooncakeKvConnectorStats.numpyPercentileLinear(new double[] {5}, 90));
        assertEquals(2.67, MooncakeKvConnectorStats.pyRound(2.675, 2)); // 2.675 is 2.67499.. in binary, as Python
        assertEquals(0.2, MooncakeKvConnectorStats.pyRound(0.25, 1)); // exact tie -> even
    }

    @Test
    void cloneAndResetHandsOverEverythingAndEmptiesTheSource() {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        s.recordTransfer(0.5, MIB, 2);
        s.recordFailedRecv();
        MooncakeKvConnectorStats snap = s.cloneAndReset();
        assertTrue(s.isEmpty());
        assertEquals(1, snap.numSuccessfulTransfers());
        assertEquals(1, snap.numFailedRecvs());
        assertFalse(snap.isEmpty());
        s.recordKvExpiredReq();
        assertEquals(0, snap.numKvExpiredReqs());
    }

    @Test
    void aggregateAppendsNonEmptyStats() {
        MooncakeKvConnectorStats a = new MooncakeKvConnectorStats();
        a.recordTransfer(0.1, MIB, 1);
        MooncakeKvConnectorStats b = new MooncakeKvConnectorStats();
        b.recordTransfer(0.3, 3 * MIB, 3);
        b.recordFailedTransfer();
        assertSame(a, a.aggregate(b));
        assertSame(a, a.aggregate(new MooncakeKvConnectorStats()));
        assertEquals(expected(2L, 200.0, 280.0, 2.0, 10.0, 2.0, 1, 0, 0), a.reduce());
        assertEquals(1, b.numSuccessfulTransfers());
        a.aggregate(a);
        assertEquals(4, a.numSuccessfulTransfers());
    }

    @Test
    void concurrentRecordingLosesNothingAndKeepsRowsAligned() throws Exception {
        MooncakeKvConnectorStats s = new MooncakeKvConnectorStats();
        List<MooncakeKvConnectorStats> snapshots = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        CountDownLatch go = new CountDownLatch(1);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                fs.add(pool.submit(() -> {
                    go.await();
                    for (int i = 0; i < 20_000; i++) {
                        s.recordTransfer(0.001, MIB, 4);
                        if (i % 10 == 0) {
                            s.recordFailedTransfer();
                        }
                    }
                    return null;
                }));
            }
            go.countDown();
            for (int k = 0; k < 50; k++) {
                snapshots.add(s.cloneAndReset());
            }
            for (Future<?> f : fs) {
                f.get(20, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        MooncakeKvConnectorStats total = new MooncakeKvConnectorStats();
        snapshots.forEach(total::aggregate);
        total.aggregate(s);
        assertEquals(80_000, total.numSuccessfulTransfers());
        assertEquals(8_000, total.numFailedTransfers());
        Map<String, Number> r = total.reduce();
        assertEquals(1.0, r.get("Avg MB per transfer"));
        assertEquals(4.0, r.get("Avg number of descriptors"));
    }
}
