package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.DeviceMemory.Direction;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.memory.fake.FakeDeviceMemory.DeviceBuffer;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The TCP transport with GPU memory, verified without a GPU: "device" buffers come from
 * {@link FakeDeviceMemory}, whose memory the host cannot touch (PROT_NONE), so every byte that
 * arrives proves that it went through the staging copies. Bounce buffers are 64 KiB, four per
 * stager, so the sizes below cover one chunk, several, and partial last chunks.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpGpuStagingTest {

    private static final int CHUNK = 64 * 1024;
    private static final long BUF = 4L << 20;
    private static final long[] SIZES = {1, 4095, CHUNK - 1, CHUNK, CHUNK + 1, 3L * CHUNK + 17, 4L * CHUNK,
        (1L << 20) + 5, 9L * CHUNK + 333};

    private FakeDeviceMemory fake;
    private HostMemoryAllocator host;
    private CoreEngine initiator;
    private CoreEngine target;

    @BeforeEach
    void setUp() {
        fake = new FakeDeviceMemory(2);
        host = new HostMemoryAllocator();
    }

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        try {
            assertEquals(List.of(), fake.violations(), "malformed copies");
            assertEquals(0, fake.openQueues(), "copy queues left open after close");
            assertEquals(0, fake.pinnedBytesLive(), "bounce buffers left allocated after close");
        } finally {
            host.close();
            fake.close();
        }
    }

    private CoreEngine engine(int shared) {
        return TcpEngines.started(TcpEngines.staged(TcpEngines.config(), fake, new StagingConfig(CHUNK, 4, shared)));
    }

    private void engines() {
        initiator = engine(8);
        target = engine(8);
    }

    private MemoryStorage buffer(boolean device, int gpu) {
        return device ? fake.allocate(gpu, BUF) : host.allocate(BUF);
    }

    private static MemorySegment bytesOf(MemoryStorage s) {
        return s instanceof DeviceBuffer d ? d.contents() : ((HostMemoryStorage) s).segment();
    }

    private static void fill(MemoryStorage s, long seed) {
        TransferEngineContractTestSupport.fill(bytesOf(s), seed);
    }

    private static byte[] read(MemoryStorage s, long off, long len) {
        return bytesOf(s).asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Descriptors of every size in {@link #SIZES}, at distinct odd offsets. */
    private static long[][] descriptors(MemoryStorage local, MemoryStorage remote) {
        int n = SIZES.length;
        long[] src = new long[n];
        long[] dst = new long[n];
        long off = 0;
        for (int i = 0; i < n; i++) {
            src[i] = local.address() + off;
            dst[i] = remote.address() + (BUF - off - SIZES[i]);
            off += SIZES[i] + 3;
        }
        return new long[][] {src, dst, SIZES.clone()};
    }

    private static void assertApplied(MemoryStorage from, long[] fromAddr, MemoryStorage to, long[] toAddr, long[] len) {
        for (int i = 0; i < len.length; i++) {
            assertArrayEquals(read(from, fromAddr[i] - from.address(), len[i]),
                    read(to, toAddr[i] - to.address(), len[i]), "descriptor " + i + " of " + len[i] + " bytes");
        }
    }

    @ParameterizedTest(name = "local on device {0}, remote on device {1}")
    @CsvSource({"true, true", "true, false", "false, true"})
    void writeAndReadBetweenEnginesMoveEveryByteThroughTheStagingCopies(boolean localDev, boolean remoteDev) {
        engines();
        MemoryStorage local = buffer(localDev, 0);
        MemoryStorage remote = buffer(remoteDev, 1);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, local.location()));
        assertEquals(0, target.registerMemory(remote.address(), BUF, remote.location()));
        fill(local, 11);
        long[][] d = descriptors(local, remote);
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), d[0], d[1], d[2]));
        assertApplied(local, d[0], remote, d[1], d[2]);

        fill(remote, 12);
        assertEquals(0, initiator.batchTransferSyncRead(target.getLocalSegmentName(), d[0], d[1], d[2]));
        assertApplied(remote, d[1], local, d[0], d[2]);

        long total = java.util.Arrays.stream(SIZES).sum();
        long d2h = (localDev ? total : 0) + (remoteDev ? total : 0);
        assertEquals(d2h, fake.bytes(Direction.DEVICE_TO_HOST), "device-to-host bytes (sent from GPU memory)");
        assertEquals(d2h, fake.bytes(Direction.HOST_TO_DEVICE), "host-to-device bytes (received into GPU memory)");
        assertEquals(0, fake.copies(Direction.DEVICE_TO_DEVICE));
        assertEquals((localDev ? 2 * total : 0), TcpTransport.in(initiator).stagedBytes());
    }

    @ParameterizedTest(name = "source on device {0}, destination on device {1}")
    @CsvSource({"true, true", "true, false", "false, true"})
    void transfersToTheOwnSegmentUseDirectDeviceCopies(boolean srcDev, boolean dstDev) {
        initiator = engine(2);
        MemoryStorage a = buffer(srcDev, 0);
        MemoryStorage b = buffer(dstDev, 1);
        assertEquals(0, initiator.batchRegisterMemory(new long[] {a.address(), b.address()}, new long[] {BUF, BUF}));
        fill(a, 21);
        long[][] d = descriptors(a, b);
        String self = initiator.getLocalSegmentName();
        assertEquals(0, initiator.batchTransferSyncWrite(self, d[0], d[1], d[2]));
        assertApplied(a, d[0], b, d[1], d[2]);
        Direction expected = Direction.of(dstDev, srcDev);
        assertEquals(SIZES.length, fake.copies(expected), "one " + expected + " copy per descriptor");
        assertEquals(SIZES.length, fake.totalCopies(), "no staging through host memory");

        fill(b, 22);
        assertEquals(0, initiator.batchTransferSyncRead(self, d[0], d[1], d[2]));
        assertApplied(b, d[1], a, d[0], d[2]);
    }

    @Test
    void wildcardRegistrationDetectsDeviceMemoryAndAdvertisesNothingElse() {
        engines();
        DeviceBuffer gpu = fake.allocate(1, BUF);
        HostMemoryStorage cpu = host.allocate(BUF);
        assertEquals(0, target.batchRegisterMemory(new long[] {gpu.address()}, new long[] {BUF}));
        assertEquals(0, initiator.registerMemory(cpu.address(), BUF));
        fill(cpu, 31);
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {cpu.address()},
                new long[] {gpu.address() + 7}, new long[] {CHUNK * 2L + 9}));
        assertArrayEquals(read(cpu, 0, CHUNK * 2L + 9), read(gpu, 7, CHUNK * 2L + 9));
        assertEquals(CHUNK * 2L + 9, fake.bytes(Direction.HOST_TO_DEVICE), "detected as cuda:1, staged");
    }

    @Test
    void copiesCompletingInRandomOrderOfTimeStillDeliverBytesInOrderAndArePipelined() {
        fake.withCopyDelay(() -> ThreadLocalRandom.current().nextLong(0, 300_000));
        engines();
        DeviceBuffer local = fake.allocate(0, BUF);
        DeviceBuffer remote = fake.allocate(0, BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cuda:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cuda:0"));
        fill(local, 41);
        long[] src = {local.address(), local.address() + (2L << 20)};
        long[] dst = {remote.address() + (2L << 20) + 1, remote.address() + 3};
        long[] len = {(2L << 20) - 1, (1L << 20) + 12345};
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len));
        assertApplied(local, src, remote, dst, len);
        local.contents().fill((byte) 0);
        assertEquals(0, initiator.batchTransferSyncRead(target.getLocalSegmentName(), src, dst, len));
        assertApplied(remote, dst, local, src, len);
        assertTrue(fake.maxOutstanding() >= 2,
                "copies of later chunks were enqueued before earlier ones completed: " + fake.maxOutstanding());
    }

    @Test
    void failedDeviceToHostCopyFailsTheWriteAndTheNextTransferWorks() {
        engines();
        DeviceBuffer local = fake.allocate(0, BUF);
        HostMemoryStorage remote = host.allocate(BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cuda:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cpu:0"));
        fill(local, 51);
        fake.failCopy(Direction.DEVICE_TO_HOST, 2);
        long len = 8L * CHUNK;
        assertNotEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(),
                new long[] {local.address()}, new long[] {remote.address()}, new long[] {len}));
        assertEquals(1, TcpTransport.in(initiator).copyFailures());
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(),
                new long[] {local.address()}, new long[] {remote.address()}, new long[] {len}));
        assertArrayEquals(read(local, 0, len), read(remote, 0, len));
    }

    @Test
    void failedHostToDeviceCopyFailsTheReadAndNothingIsWrittenAfterTheCallReturned() {
        engines();
        DeviceBuffer local = fake.allocate(0, BUF);
        HostMemoryStorage remote = host.allocate(BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cuda:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cpu:0"));
        fill(remote, 61);
        local.contents().fill((byte) 0x5A);
        fake.withCopyDelay(() -> 100_000); // copies are still running when the failure is seen
        fake.failCopy(Direction.HOST_TO_DEVICE, 3);
        long len = 12L * CHUNK;
        assertNotEquals(0, initiator.batchTransferSyncRead(target.getLocalSegmentName(),
                new long[] {local.address()}, new long[] {remote.address()}, new long[] {len}));
        long copiesAtReturn = fake.copies(Direction.HOST_TO_DEVICE);
        byte[] atReturn = read(local, 0, BUF);
        assertEquals(3, copiesAtReturn, "chunks before the failed one were copied; none after it");
        initiator.close(); // joins the lane threads: any copy still to come would run before this returns
        initiator = null;
        assertEquals(copiesAtReturn, fake.copies(Direction.HOST_TO_DEVICE), "copies after the call returned");
        assertArrayEquals(atReturn, read(local, 0, BUF), "bytes written after the call returned");
        assertArrayEquals(read(remote, 0, 3L * CHUNK), read(local, 0, 3L * CHUNK));
    }

    @Test
    void failedCopyAtTheTargetFailsTheWriteAndTheTargetRecovers() {
        engines();
        HostMemoryStorage local = host.allocate(BUF);
        DeviceBuffer remote = fake.allocate(1, BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cuda:1"));
        fill(local, 71);
        fake.failCopy(Direction.HOST_TO_DEVICE, 1);
        long[] src = {local.address()};
        long[] dst = {remote.address()};
        long[] len = {5L * CHUNK + 1};
        assertNotEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len));
        assertEquals(1, TcpTransport.in(target).copyFailures());
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len));
        assertApplied(local, src, remote, dst, len);
    }

    @Test
    void sessionsWaitForAFreeStagerWhenThePoolIsExhausted() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        fake.withCopyDelay(() -> {
            try {
                release.await(30, TimeUnit.SECONDS); // the first copies hold their stager until released
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return 0;
        });
        initiator = engine(8);
        target = engine(1); // one shared stager for all data-port sessions
        HostMemoryStorage local = host.allocate(BUF);
        DeviceBuffer remote = fake.allocate(0, BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cuda:0"));
        fill(local, 81);
        // two initiators: two connections, so two data-port sessions compete for the one stager
        try (CoreEngine second = engine(8);
             ExecutorService callers = Executors.newFixedThreadPool(2)) {
            HostMemoryStorage local2 = host.allocate(BUF);
            assertEquals(0, second.registerMemory(local2.address(), BUF, "cpu:0"));
            fill(local2, 82);
            long half = BUF / 2;
            CompletableFuture<Integer> first = CompletableFuture.supplyAsync(() -> initiator.batchTransferSyncWrite(
                    target.getLocalSegmentName(), new long[] {local.address()}, new long[] {remote.address()},
                    new long[] {half}), callers);
            CompletableFuture<Integer> other = CompletableFuture.supplyAsync(() -> second.batchTransferSyncWrite(
                    target.getLocalSegmentName(), new long[] {local2.address() + half},
                    new long[] {remote.address() + half}, new long[] {half}), callers);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (TcpTransport.in(target).stagerWaits() == 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            long waits = TcpTransport.in(target).stagerWaits();
            release.countDown();
            assertEquals(0, first.get(30, TimeUnit.SECONDS));
            assertEquals(0, other.get(30, TimeUnit.SECONDS));
            assertTrue(waits > 0, "the second session waited for the single stager");
            assertEquals(1, TcpTransport.in(target).stagers(), "the pool never grew beyond its size");
            assertArrayEquals(read(local, 0, half), read(remote, 0, half));
            assertArrayEquals(read(local2, half, half), read(remote, half, half));
        }
    }

    @Test
    void registeringGpuMemoryWithoutCudaFailsAndTheAccessCheckSaysWhy() {
        String why = "CUDA is unavailable: no NVIDIA driver. Fix: install an NVIDIA driver";
        try (FakeDeviceMemory none = FakeDeviceMemory.unavailable(why)) {
            initiator = TcpEngines.started(TcpEngines.alone(TcpEngines.config(), none));
            assertEquals(ErrorCodes.DEVICE_NOT_FOUND, initiator.registerMemory(0x7000_0000_0000L, 4096, "cuda:0"));
            DeviceMemoryAccess access = initiator.deviceMemoryAccess("cuda:0");
            assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, access.kind());
            assertTrue(access.description().contains(why), access.description());
            HostMemoryStorage cpu = host.allocate(4096);
            assertEquals(0, initiator.registerMemory(cpu.address(), 4096), "host memory is unaffected");
        }
    }

    @Test
    void accessCheckReportsStagingWhenDeviceMemoryIsUsable() {
        initiator = engine(8);
        DeviceMemoryAccess access = initiator.deviceMemoryAccess("cuda:1");
        assertEquals(DeviceMemoryAccess.Kind.STAGED, access.kind());
        assertTrue(access.description().contains("pinned host bounce buffers"), access.description());
        assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, initiator.deviceMemoryAccess("cuda:2").kind(),
                "a device the fake does not have");
        assertEquals(ErrorCodes.DEVICE_NOT_FOUND, initiator.registerMemory(0x7000_0000_0000L, 4096, "cuda:2"));
    }

    @Test
    void theRealEngineWithoutCudaRefusesGpuMemoryWithTheProbesCause() {
        org.junit.jupiter.api.Assumptions.assumeFalse(io.mooncake4j.memory.cuda.CudaAvailability.isAvailable(),
                "CUDA is available here; TcpGpuStagingGpuTest covers this host");
        try (CoreEngine real = TcpEngines.started()) {
            assertEquals(ErrorCodes.DEVICE_NOT_FOUND, real.registerMemory(0x7000_0000_0000L, 4096, "cuda:0"));
            DeviceMemoryAccess access = real.deviceMemoryAccess("cuda:0");
            assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, access.kind());
            assertTrue(access.description().contains(
                    io.mooncake4j.memory.cuda.CudaAvailability.unavailabilityCause().getMessage()), access.description());
        }
    }

    @Test
    void unregisteringGpuMemoryWaitsForTheStagedTransferUsingIt() throws Exception {
        fake.withCopyDelay(() -> 200_000);
        engines();
        HostMemoryStorage local = host.allocate(BUF);
        DeviceBuffer remote = fake.allocate(0, BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cuda:0"));
        CompletableFuture<Integer> rc = CompletableFuture.supplyAsync(() -> initiator.batchTransferSyncWrite(
                target.getLocalSegmentName(), new long[] {local.address()}, new long[] {remote.address()},
                new long[] {BUF}));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (fake.copies(Direction.HOST_TO_DEVICE) == 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(0, target.unregisterMemory(remote.address()));
        long after = fake.copies(Direction.HOST_TO_DEVICE);
        assertEquals(0, (int) rc.get(30, TimeUnit.SECONDS), "the transfer was allowed to finish first");
        assertEquals(after, fake.copies(Direction.HOST_TO_DEVICE), "no copy into the buffer after unregistration");
        assertEquals(BUF / CHUNK, after);
    }
}
