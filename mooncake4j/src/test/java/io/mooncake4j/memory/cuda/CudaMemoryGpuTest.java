package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * GPU memory on a real device: allocation, H2D/D2H/D2D copies (synchronous and on a stream),
 * pointer-location detection and pinned host memory. Excluded by default ({@code gpu} tag); run
 * with {@code -Dgroups=gpu} or {@code scripts/gpu-check.sh}. Skipped, with the probe's cause, where
 * CUDA is unavailable.
 */
@Tag("gpu")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CudaMemoryGpuTest {

    private static final long MIB = 1L << 20;

    @BeforeEach
    void needsAGpu() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
    }

    private static void pattern(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, seed * 0x9E3779B97F4A7C15L + i);
        }
    }

    private static void assertPattern(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i += 8) {
            long expected = seed * 0x9E3779B97F4A7C15L + i;
            long got = s.get(ValueLayout.JAVA_LONG_UNALIGNED, i);
            if (got != expected) {
                throw new AssertionError("byte offset " + i + ": expected " + Long.toHexString(expected)
                        + ", got " + Long.toHexString(got));
            }
        }
    }

    @Test
    void probeReportsDevicesDriverAndRuntime() {
        assertEquals(null, CudaAvailability.unavailabilityCause());
        assertEquals(null, CudaAvailability.reason());
        assertTrue(CudaAvailability.deviceCount() > 0);
        assertTrue(CudaAvailability.driverVersion() >= CudaAvailability.runtimeVersion(),
                CudaAvailability.summary());
        assertTrue(CudaAvailability.summary().startsWith("CUDA available: "), CudaAvailability.summary());
    }

    @Test
    void deviceStorageReportsItsLocationAndFreesOnClose() {
        CudaDeviceStorage d = CudaDeviceStorage.allocate("cuda:0", 4 * MIB);
        assertEquals("cuda:0", d.location());
        assertEquals(0, d.device());
        assertEquals(4 * MIB, d.byteSize());
        assertTrue(d.isDevice());
        assertTrue(d.address() != 0);
        assertTrue(d.hostSegment().isEmpty());
        d.close();
        d.close();
        assertFalse(d.isAlive());
        assertThrows(IllegalStateException.class, () -> d.fill((byte) 1));
    }

    @Test
    void missingDeviceIndexIsRejectedWithTheDeviceCount() {
        int n = CudaAvailability.deviceCount();
        CudaException e = assertThrows(CudaException.class, () -> CudaDeviceStorage.allocate(n, 4096));
        assertTrue(e.getMessage().contains("CUDA sees " + n + " device(s)"), e.getMessage());
        CudaAvailability.checkLocation("cuda:0");
    }

    @Test
    void hostToDeviceToDeviceToHostRoundTripPreservesBytes() {
        try (HostMemoryAllocator host = new HostMemoryAllocator();
             CudaDeviceStorage a = CudaDeviceStorage.allocate(0, 8 * MIB);
             CudaDeviceStorage b = CudaDeviceStorage.allocate(0, 8 * MIB)) {
            HostMemoryStorage src = host.allocate(8 * MIB);
            HostMemoryStorage dst = host.allocate(8 * MIB);
            pattern(src.segment(), 7);
            CudaCopies.copy(a, 0, src, 0, 8 * MIB);           // H2D
            CudaCopies.copy(b, 0, a, 0, 8 * MIB);             // D2D
            CudaCopies.copy(dst, 0, b, 0, 8 * MIB);           // D2H
            assertPattern(dst.segment(), 7);
            // an offset copy lands where it should
            b.fill((byte) 0);
            CudaCopies.copy(b, 4096, src, 0, 4096);
            dst.segment().fill((byte) 0x55);
            CudaCopies.copy(dst, 0, b, 0, 8192);
            assertEquals(0, dst.segment().get(ValueLayout.JAVA_LONG, 0));
            assertEquals(src.segment().get(ValueLayout.JAVA_LONG, 0), dst.segment().get(ValueLayout.JAVA_LONG, 4096));
            assertThrows(IllegalArgumentException.class, () -> CudaCopies.copy(b, 8 * MIB - 8, src, 0, 16));
        }
    }

    @Test
    void fillSetsEveryByte() {
        try (HostMemoryAllocator host = new HostMemoryAllocator();
             CudaDeviceStorage d = CudaDeviceStorage.allocate(0, MIB)) {
            HostMemoryStorage h = host.allocate(MIB);
            d.fill((byte) 0xAB);
            CudaCopies.copy(h, 0, d, 0, MIB);
            for (long i = 0; i < MIB; i += 4099) {
                assertEquals((byte) 0xAB, h.segment().get(ValueLayout.JAVA_BYTE, i));
            }
        }
    }

    @Test
    void asyncCopiesThroughPinnedMemoryOnAStreamCompleteAfterSynchronize() {
        try (CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator();
             CudaDeviceStorage d = CudaDeviceStorage.allocate(0, 16 * MIB);
             CudaStream stream = CudaStream.create(0)) {
            HostMemoryStorage src = pinned.allocate(16 * MIB);
            HostMemoryStorage dst = pinned.allocate(16 * MIB);
            pattern(src.segment(), 11);
            long chunk = MIB;
            for (long off = 0; off < 16 * MIB; off += chunk) {
                assertEquals(CudaError.SUCCESS,
                        stream.copyAsync(d.address() + off, src.address() + off, chunk, CudaCopyKind.HOST_TO_DEVICE));
            }
            for (long off = 0; off < 16 * MIB; off += chunk) {
                assertEquals(CudaError.SUCCESS,
                        stream.copyAsync(dst.address() + off, d.address() + off, chunk, CudaCopyKind.DEVICE_TO_HOST));
            }
            assertEquals(CudaError.SUCCESS, stream.synchronize());
            assertEquals(CudaError.SUCCESS, stream.query());
            assertPattern(dst.segment(), 11);
        }
    }

    @Test
    void pipelinedStagingThroughPinnedBounceBuffersWithEventsPreservesBytes() {
        long total = 32 * MIB;
        try (HostMemoryAllocator host = new HostMemoryAllocator();
             CudaDeviceStorage a = CudaDeviceStorage.allocate(0, total);
             CudaDeviceStorage b = CudaDeviceStorage.allocate(0, total)) {
            HostMemoryStorage h = host.allocate(total);
            pattern(h.segment(), 5);
            CudaCopies.copy(a, 0, h, 0, total);
            b.fill((byte) 0);
            assertEquals(CudaError.SUCCESS, CudaCopyBench.stage(a.address(), b.address(), total, MIB, 3, 0));
            h.segment().fill((byte) 0);
            CudaCopies.copy(h, 0, b, 0, total);
            assertPattern(h.segment(), 5);
        }
    }

    @Test
    void eventTellsWhenRecordedWorkIsDone() {
        try (CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator();
             CudaDeviceStorage d = CudaDeviceStorage.allocate(0, 8 * MIB);
             CudaStream stream = CudaStream.create(0);
             CudaEvent event = CudaEvent.create(0)) {
            HostMemoryStorage src = pinned.allocate(8 * MIB);
            pattern(src.segment(), 9);
            assertEquals(CudaError.SUCCESS, stream.copyAsync(d.address(), src.address(), 8 * MIB,
                    CudaCopyKind.HOST_TO_DEVICE));
            assertEquals(CudaError.SUCCESS, event.record(stream));
            assertEquals(CudaError.SUCCESS, event.synchronize());
            assertEquals(CudaError.SUCCESS, event.query());
        }
    }

    @Test
    void explicitDirectionIsWhatJCudaAccepts() {
        try (HostMemoryAllocator host = new HostMemoryAllocator();
             CudaDeviceStorage d = CudaDeviceStorage.allocate(0, MIB)) {
            HostMemoryStorage h = host.allocate(MIB);
            assertEquals(CudaCopyKind.HOST_TO_DEVICE, CudaCopies.kindOf(d, h));
            assertEquals(CudaCopyKind.DEVICE_TO_HOST, CudaCopies.kindOf(h, d));
            assertEquals(CudaCopyKind.DEVICE_TO_DEVICE,
                    CudaCopies.kindOf(MemoryStorage.of(d.address(), MIB, "*"), d));
            assertEquals(CudaError.SUCCESS, CudaCopies.copy(d.address(), h.address(), MIB, CudaCopyKind.HOST_TO_DEVICE));
        }
    }

    @Test
    void pointerDetectionTellsDeviceFromHostMemory() {
        try (HostMemoryAllocator host = new HostMemoryAllocator("*");
             CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator("*");
             CudaDeviceStorage d = CudaDeviceStorage.allocate(0, MIB)) {
            HostMemoryStorage pageable = host.allocate(MIB);
            HostMemoryStorage locked = pinned.allocate(MIB);
            assertEquals(0, CudaPointers.deviceOf(d.address()));
            assertEquals(0, CudaPointers.deviceOf(d.address() + 12345), "interior pointers are device memory too");
            assertEquals(-1, CudaPointers.deviceOf(pageable.address()));
            assertEquals(-1, CudaPointers.deviceOf(locked.address()));
            assertEquals("cuda:0", CudaPointers.resolveLocation(MemoryStorage.of(d.address(), MIB, "*"), "cpu:0"));
            assertEquals("cpu:0", CudaPointers.resolveLocation(pageable, "cpu:0"));
            assertEquals("cpu:0", CudaPointers.resolveLocation(locked, "cpu:0"));
            // a failed attribute query for host memory leaves no error behind
            assertEquals(CudaError.SUCCESS, JCudaBinding.getLastError());
        }
    }

    @Test
    void pinnedAllocationsAreAlignedZeroedAndFreedByTheAllocator() {
        HostMemoryStorage a;
        HostMemoryStorage b;
        try (CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator("cpu:0")) {
            a = pinned.allocate(3 * MIB + 5);
            b = pinned.allocate(MIB);
            assertEquals(0, a.address() % HostMemoryAllocator.PAGE_SIZE);
            assertEquals(0L, a.segment().get(ValueLayout.JAVA_LONG, MIB));
            assertEquals(4 * MIB + 5, pinned.allocatedBytes());
            assertEquals("cpu:0", a.location());
            b.close();
            b.close();
            assertEquals(3 * MIB + 5, pinned.allocatedBytes());
        }
        assertFalse(a.isAlive());
        assertThrows(IllegalStateException.class, a::segment);
    }

    @Test
    void everyVisibleDeviceAllocatesAndCopiesPeerToPeer() {
        int n = CudaAvailability.deviceCount();
        try (HostMemoryAllocator host = new HostMemoryAllocator()) {
            HostMemoryStorage src = host.allocate(MIB);
            HostMemoryStorage dst = host.allocate(MIB);
            pattern(src.segment(), 3);
            try (CudaDeviceStorage first = CudaDeviceStorage.allocate(0, MIB)) {
                CudaCopies.copy(first, 0, src, 0, MIB);
                for (int dev = 1; dev < n; dev++) {
                    try (CudaDeviceStorage other = CudaDeviceStorage.allocate(dev, MIB)) {
                        assertEquals("cuda:" + dev, other.location());
                        assertEquals(dev, CudaPointers.deviceOf(other.address()));
                        CudaCopies.copy(other, 0, first, 0, MIB);
                        dst.segment().fill((byte) 0);
                        CudaCopies.copy(dst, 0, other, 0, MIB);
                        assertPattern(dst.segment(), 3);
                    }
                }
            }
            assertTrue(CudaAvailability.deviceName(0).length() > 0);
        }
    }
}
