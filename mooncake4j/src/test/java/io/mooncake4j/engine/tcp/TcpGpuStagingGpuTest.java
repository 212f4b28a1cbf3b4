package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaCopies;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import io.mooncake4j.memory.cuda.CudaDeviceStorage;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The TCP transport with real GPU memory (CUDA through JCuda): bounce-buffer staging on both sides
 * over 127.0.0.1, {@code *} registrations detected as device memory, device-to-device copies to the
 * own segment. Skipped with the probe's cause where CUDA is unavailable; run by
 * {@code scripts/gpu-check.sh}.
 */
@Tag("gpu")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpGpuStagingGpuTest {

    private static final long MIB = 1L << 20;
    private static final long BUF = 64 * MIB;

    private HostMemoryAllocator host;
    private CudaDeviceStorage localGpu;
    private CudaDeviceStorage remoteGpu;
    private CoreEngine initiator;
    private CoreEngine target;

    @BeforeEach
    void setUp() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
        host = new HostMemoryAllocator();
        int remoteDevice = CudaAvailability.deviceCount() > 1 ? 1 : 0;
        localGpu = CudaDeviceStorage.allocate(0, BUF);
        remoteGpu = CudaDeviceStorage.allocate(remoteDevice, BUF);
        StagingConfig staging = new StagingConfig((int) MIB, 4, 8);
        initiator = TcpEngines.started(TcpEngines.staged(TcpEngines.config(), CudaDeviceMemory.INSTANCE, staging));
        target = TcpEngines.started(TcpEngines.staged(TcpEngines.config(), CudaDeviceMemory.INSTANCE, staging));
        assertEquals(0, initiator.registerMemory(localGpu.address(), BUF, "cuda:0"));
        assertEquals(0, target.registerMemory(remoteGpu.address(), BUF), "'*' detected as " + remoteGpu.location());
    }

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        if (localGpu != null) {
            localGpu.close();
        }
        if (remoteGpu != null) {
            remoteGpu.close();
        }
        if (host != null) {
            host.close();
        }
    }

    private HostMemoryStorage upload(CudaDeviceStorage gpu, long seed) {
        HostMemoryStorage h = host.allocate(BUF);
        TransferEngineContractTestSupport.fill(h.segment(), seed);
        CudaCopies.copy(gpu, 0, h, 0, BUF);
        return h;
    }

    private MemorySegment download(CudaDeviceStorage gpu) {
        HostMemoryStorage h = host.allocate(BUF);
        CudaCopies.copy(h, 0, gpu, 0, BUF);
        return h.segment();
    }

    private static void assertSame(MemorySegment expected, long eOff, MemorySegment actual, long aOff, long len,
            String what) {
        long m = expected.asSlice(eOff, len).mismatch(actual.asSlice(aOff, len));
        assertEquals(-1, m, what + ": first differing byte");
    }

    @Test
    void writeAndReadBetweenGpusOverTcpMoveEveryByte() {
        assertEquals(DeviceMemoryAccess.Kind.STAGED, initiator.deviceMemoryAccess("cuda:0").kind());
        HostMemoryStorage src = upload(localGpu, 1);
        long[] len = {1, 4095, MIB - 1, MIB, MIB + 1, 5 * MIB + 333, 17 * MIB};
        long[] l = new long[len.length];
        long[] r = new long[len.length];
        long off = 0;
        for (int i = 0; i < len.length; i++) {
            l[i] = localGpu.address() + off;
            r[i] = remoteGpu.address() + BUF - off - len[i];
            off += len[i] + 7;
        }
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), l, r, len));
        MemorySegment remote = download(remoteGpu);
        for (int i = 0; i < len.length; i++) {
            assertSame(src.segment(), l[i] - localGpu.address(), remote, r[i] - remoteGpu.address(), len[i],
                    "write " + len[i]);
        }
        upload(remoteGpu, 2);
        MemorySegment remote2 = download(remoteGpu);
        assertEquals(0, initiator.batchTransferSyncRead(target.getLocalSegmentName(), l, r, len));
        MemorySegment local = download(localGpu);
        for (int i = 0; i < len.length; i++) {
            assertSame(remote2, r[i] - remoteGpu.address(), local, l[i] - localGpu.address(), len[i],
                    "read " + len[i]);
        }
        assertEquals(0, TcpTransport.in(initiator).copyFailures());
        assertEquals(0, TcpTransport.in(target).copyFailures());
    }

    @Test
    void transfersToTheOwnSegmentCopyDeviceToDevice() {
        assertEquals(0, initiator.registerMemory(remoteGpu.address(), BUF, remoteGpu.location()));
        HostMemoryStorage src = upload(localGpu, 3);
        String self = initiator.getLocalSegmentName();
        assertEquals(0, initiator.batchTransferSyncWrite(self, new long[] {localGpu.address() + 5},
                new long[] {remoteGpu.address() + 11}, new long[] {BUF - 16}));
        assertSame(src.segment(), 5, download(remoteGpu), 11, BUF - 16, "device-to-device");
        assertEquals(0, TcpTransport.in(initiator).stagedBytes(), "no staging for the own segment");
    }

    @Test
    void stagedThroughputOverLoopbackIsReported() {
        upload(localGpu, 4);
        String t = target.getLocalSegmentName();
        long[] l = {localGpu.address()};
        long[] r = {remoteGpu.address()};
        long[] n = {BUF};
        assertEquals(0, initiator.batchTransferSyncWrite(t, l, r, n)); // warm-up: connections, stagers
        int iters = 5;
        long best = Long.MAX_VALUE;
        for (int i = 0; i < iters; i++) {
            long t0 = System.nanoTime();
            assertEquals(0, initiator.batchTransferSyncWrite(t, l, r, n));
            best = Math.min(best, System.nanoTime() - t0);
        }
        double gbps = BUF / (best / 1e9) / 1e9;
        System.out.printf(Locale.ROOT, "tcp-gpu-staging: GPU->TCP loopback->GPU write of %d MiB, best of %d: %.2f GB/s%n",
                BUF / MIB, iters, gbps);
        assertTrue(gbps > 0);
    }
}
