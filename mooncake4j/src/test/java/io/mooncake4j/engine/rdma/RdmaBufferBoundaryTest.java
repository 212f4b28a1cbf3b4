package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Slices split at registered-buffer boundaries on both sides, also across the pieces of a buffer
 * above {@code max_mr_size} (a registration the NIC splits); devices registered in parallel, so that
 * registering a large buffer on several NICs does not take their sum.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaBufferBoundaryTest {

    private static final long KIB = 1024;
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine target;
    private CoreEngine initiator;

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        alloc.close();
    }

    private static void fill(MemorySegment s, long seed) {
        Random r = new Random(seed);
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
    }

    private static byte[] bytes(MemorySegment s, long off, long len) {
        return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void aTransferSpanningAdjacentBuffersOnBothSidesSucceeds() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        initiator = EmulatedEngines.started(fabric, "emu1");
        HostMemoryStorage local = alloc.allocate(1024 * KIB);
        HostMemoryStorage remote = alloc.allocate(1024 * KIB);
        // different boundaries on each side, none on a slice boundary
        assertEquals(0, initiator.registerMemory(local.address(), 500 * KIB + 3, "cpu:0"));
        assertEquals(0, initiator.registerMemory(local.address() + 500 * KIB + 3, 524 * KIB - 3, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), 300 * KIB, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address() + 300 * KIB, 100 * KIB + 1, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address() + 400 * KIB + 1, 624 * KIB - 1, "cpu:0"));
        fill(local.segment(), 5);
        long before = fabric.postedRequests();
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {1024 * KIB}));
        assertArrayEquals(bytes(local.segment(), 0, 1024 * KIB), bytes(remote.segment(), 0, 1024 * KIB));
        // slices restart at each boundary (300 K, 400 K+1, 500 K+3): [0, 300 K) 4 + a 44 K one, then 2, 2,
        // and 8 for the last 524 K-3 (its 12 K-3 tail within the fragment limit joins the last slice)
        assertEquals(5 + 2 + 2 + 8, fabric.postedRequests() - before);
        // and back, read from the middle of a piece across two boundaries
        fill(remote.segment(), 9);
        assertEquals(0, initiator.batchTransferSyncRead(target.getLocalSegmentName(),
                new long[] {local.address() + 7}, new long[] {remote.address() + 250 * KIB},
                new long[] {600 * KIB}));
        assertArrayEquals(bytes(remote.segment(), 250 * KIB, 600 * KIB), bytes(local.segment(), 7, 600 * KIB));
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
    }

    @Test
    void aGapBetweenBuffersFailsTheTaskWithoutPostingAnything() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        initiator = EmulatedEngines.started(fabric, "emu1");
        HostMemoryStorage local = alloc.allocate(256 * KIB);
        HostMemoryStorage remote = alloc.allocate(256 * KIB);
        assertEquals(0, initiator.registerMemory(local.address(), 256 * KIB, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), 100 * KIB, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address() + 101 * KIB, 155 * KIB, "cpu:0")); // 1 KiB hole
        long before = fabric.postedRequests();
        assertEquals(-1, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {256 * KIB}));
        assertEquals(before, fabric.postedRequests(), "nothing posted for a task that cannot complete");
        assertEquals(-1, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {257 * KIB}), "past the local registration");
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
    }

    @Test
    void buffersAboveMaxMrSizeAreRegisteredAndPublishedInPiecesAndTransfersCrossThem() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        Map<String, String> env = Map.of("MC_MAX_MR_SIZE", String.valueOf(256 * KIB));
        target = EmulatedEngines.started(fabric, "emu0,emu1", EmulatedEngines.config(env));
        initiator = EmulatedEngines.started(fabric, "emu2", EmulatedEngines.config(env));
        HostMemoryStorage local = alloc.allocate(1024 * KIB);
        HostMemoryStorage remote = alloc.allocate(1024 * KIB + 5);
        assertEquals(0, initiator.registerMemory(local.address(), 1024 * KIB, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), 1024 * KIB + 5, "cpu:0"));
        List<SegmentDescriptor.Buffer> published = target.localDescriptor().buffers();
        assertEquals(5, published.size(), "4 pieces of 256 KiB and one of 5 bytes");
        for (int i = 0; i < published.size(); i++) {
            assertEquals(remote.address() + i * 256 * KIB, published.get(i).addr());
            assertEquals(i < 4 ? 256 * KIB : 5, published.get(i).length());
            assertEquals(2, published.get(i).rkey().size(), "keys on both devices");
        }
        assertEquals(4 + 5 * 2, fabric.liveMemoryRegions());
        fill(local.segment(), 3);
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(),
                new long[] {local.address() + 10}, new long[] {remote.address() + 200 * KIB},
                new long[] {800 * KIB}));
        assertArrayEquals(bytes(local.segment(), 10, 800 * KIB), bytes(remote.segment(), 200 * KIB, 800 * KIB));
        assertEquals(ErrorCodes.OK, target.unregisterMemory(remote.address()), "one call removes every piece");
        assertEquals(4, fabric.liveMemoryRegions());
        assertTrue(target.localDescriptor().buffers().isEmpty());
        assertEquals(ErrorCodes.ADDRESS_NOT_REGISTERED, target.unregisterMemory(remote.address() + 256 * KIB),
                "a piece is not a registration of its own");
    }

    @Test
    void aPeerBufferWithoutKeysDoesNotHideALaterOneHoldingTheRange() {
        String gid = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01";
        SegmentDescriptor d = new SegmentDescriptor("10.0.0.2:15321", "rdma", 0, 1, SegmentDescriptor.now(), null,
                List.of(new SegmentDescriptor.Buffer("cpu:0", 4096, 8192, List.of(), List.of()),
                        new SegmentDescriptor.Buffer("cpu:0", 4096, 8192, List.of(7L), List.of(7L))),
                List.of(new SegmentDescriptor.Device("mlx5_0", 0, gid)), Map.of());
        PeerSegment p = new PeerSegment(1, d);
        assertEquals(1, p.bufferAt(4096 + 100));
        assertEquals(8192, p.coveredFrom(4096, 8192));
        assertEquals(0, p.coveredFrom(4096 + 8192, 1));
    }

    @Test
    void devicesAreRegisteredInParallel() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        initiator = EmulatedEngines.started(fabric, "emu0,emu1,emu2");
        HostMemoryStorage big = alloc.allocate(ParallelRegistration.PARALLEL_MIN_BYTES);
        // each ibv_reg_mr waits until all three devices are inside it at once: one after another times out
        fabric.registrationRendezvous(3, 5_000);
        assertEquals(ErrorCodes.OK, initiator.registerMemory(big.address(), big.byteSize(), "cpu:0"),
                initiator.lastError());
        assertEquals(3, fabric.liveMemoryRegions());
        fabric.registrationRendezvous(0, 0);
        assertEquals(ErrorCodes.OK, initiator.unregisterMemory(big.address()));
        // a failure on one device rolls back the others
        fabric.failPlainRegistration(big.address(), big.address() + 1, EmulatedRdmaProvider.EFAULT);
        assertEquals(ErrorCodes.CONTEXT, initiator.registerMemory(big.address(), big.byteSize(), "cpu:0"));
        assertEquals(0, fabric.liveMemoryRegions());
    }
}
