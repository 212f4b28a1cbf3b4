package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Batches that mix body sizes around the staging limit and alternate between registered buffers on
 * both sides, so that gathered writes switch buffers mid-batch, merge adjacent bodies and mix
 * copied small bodies with bodies sent in place; every byte is checked, with gathering on and off.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GatheredTransfersTest {

    private static final int BUF = 8 << 20;
    private static final long[] SIZES = {1, Lane.STAGE_LIMIT, Lane.STAGE_LIMIT + 1, 64 * 1024, 100_003, 1 << 20,
        (1 << 20) + 3, 7, Lane.GATHER_BYTES - 1, 32 * 1024, Lane.GATHER_BYTES, 64 * 1024};

    @ParameterizedTest(name = "gather {0}")
    @ValueSource(booleans = {true, false})
    void mixedBatchesWriteAndReadBackEveryByte(boolean gather) {
        TcpConfig cfg = TcpEngines.config().withGatherWrites(gather);
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine target = TcpEngines.started(cfg);
                CoreEngine initiator = TcpEngines.started(cfg)) {
            HostMemoryStorage[] src = {alloc.allocate(BUF), alloc.allocate(BUF)};
            HostMemoryStorage[] dst = {alloc.allocate(BUF), alloc.allocate(BUF)};
            HostMemoryStorage[] back = {alloc.allocate(BUF), alloc.allocate(BUF)};
            for (HostMemoryStorage s : List.of(src[0], src[1], back[0], back[1])) {
                assertEquals(0, initiator.registerMemory(s.address(), BUF, "cpu:0"));
            }
            for (HostMemoryStorage s : dst) {
                assertEquals(0, target.registerMemory(s.address(), BUF, "cpu:0"));
            }
            for (int b = 0; b < 2; b++) {
                MemorySegment m = src[b].segment();
                for (int i = 0; i < BUF; i++) {
                    m.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + b * 101 + 1));
                }
            }
            // descriptors: three rounds over the sizes; buffers alternate in runs of 1, 2 and 3 so
            // that some neighbours are adjacent in memory (mergeable) and some switch buffers
            List<long[]> d = new ArrayList<>(); // {buffer, offset, length}
            long[] next = {0, 0};
            int k = 0;
            for (int round = 0; round < 3; round++) {
                for (long len : SIZES) {
                    int b = (k / (round + 1)) % 2;
                    d.add(new long[] {b, next[b], len});
                    next[b] += len + (k % 3 == 0 ? 0 : 4096); // some adjacent, some with gaps
                    k++;
                }
            }
            int n = d.size();
            long[] s = new long[n];
            long[] t = new long[n];
            long[] r = new long[n];
            long[] len = new long[n];
            for (int i = 0; i < n; i++) {
                long[] e = d.get(i);
                s[i] = src[(int) e[0]].address() + e[1];
                t[i] = dst[(int) e[0]].address() + e[1];
                r[i] = back[(int) e[0]].address() + e[1];
                len[i] = e[2];
            }
            String seg = target.getLocalSegmentName();
            assertEquals(0, initiator.batchTransferSyncWrite(seg, s, t, len));
            for (int i = 0; i < n; i++) {
                long[] e = d.get(i);
                assertEquals(-1, dst[(int) e[0]].segment().asSlice(e[1], e[2])
                        .mismatch(src[(int) e[0]].segment().asSlice(e[1], e[2])), "write " + i + " of " + e[2] + " B");
            }
            assertEquals(0, initiator.batchTransferSyncRead(seg, r, t, len));
            for (int i = 0; i < n; i++) {
                long[] e = d.get(i);
                assertEquals(-1, back[(int) e[0]].segment().asSlice(e[1], e[2])
                        .mismatch(src[(int) e[0]].segment().asSlice(e[1], e[2])), "read " + i + " of " + e[2] + " B");
            }
        }
    }
}
