package io.mooncake4j.engine.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.internal.sys.SharedMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shm-only engine ({@link EngineBuilder#shmDirect()}): two of them in one JVM over the real handshake
 * port (peer = this process), every slice over shm.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ShmOnlyEngineTest {

    @BeforeEach
    void linux() {
        assumeTrue(SharedMemory.available() && MachineIdentity.local() != null, "no memfd or /proc here");
    }

    @Test
    void writesAndReadsBetweenEnginesThroughTheAdvertisedMemfd() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine a = EngineBuilder.only("shm"); CoreEngine b = EngineBuilder.only("shm")) {
            assertEquals(0, a.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "shm", ""));
            assertEquals(0, b.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "shm", ""));
            HostMemoryStorage src = alloc.allocateShareable(1 << 20);
            HostMemoryStorage dst = alloc.allocateShareable(1 << 20);
            HostMemoryStorage back = alloc.allocatePrivate(1 << 20);
            assertEquals(0, a.registerMemory(src.address(), src.byteSize(), "cpu:0"));
            assertEquals(0, a.registerMemory(back.address(), back.byteSize(), "cpu:0"));
            assertEquals(0, b.registerMemory(dst.address(), dst.byteSize(), "cpu:0"));
            ShmFixtures.fill(src.segment(), 11);
            assertEquals(dst.address(), a.getFirstBufferAddress(b.getLocalSegmentName()));
            long[] local = new long[16];
            long[] remote = new long[16];
            long[] lens = new long[16];
            for (int i = 0; i < 16; i++) { // reversed order: every slice its own copy
                local[i] = src.address() + i * 65536L;
                remote[i] = dst.address() + (15 - i) * 65536L;
                lens[i] = 65536;
            }
            assertEquals(0, a.batchTransferSyncWrite(b.getLocalSegmentName(), local, remote, lens));
            for (int i = 0; i < 16; i++) {
                assertTrue(dst.segment().asSlice((15 - i) * 65536L, 65536)
                        .mismatch(src.segment().asSlice(i * 65536L, 65536)) == -1, "block " + i);
            }
            assertEquals(0, a.batchTransferSyncRead(b.getLocalSegmentName(), new long[] {back.address()},
                    new long[] {dst.address()}, new long[] {1 << 20}));
            assertEquals(-1, back.segment().mismatch(dst.segment()));
            // outside the advertised buffer: refused, nothing written
            assertNotEquals(0, a.batchTransferSyncWrite(b.getLocalSegmentName(), new long[] {src.address()},
                    new long[] {dst.address() + (1 << 20) - 8}, new long[] {16}));
        }
    }

    @Test
    void aPeerWithoutTheShmAdvertIsRefusedNotWrittenToByAnotherPath() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine a = EngineBuilder.only("shm"); CoreEngine tcp = EngineBuilder.only("tcp")) {
            assertEquals(0, a.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "shm", ""));
            assertEquals(0, tcp.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "tcp", ""));
            HostMemoryStorage src = alloc.allocateShareable(4096);
            HostMemoryStorage dst = alloc.allocateShareable(4096);
            assertEquals(0, a.registerMemory(src.address(), 4096, "cpu:0"));
            assertEquals(0, tcp.registerMemory(dst.address(), 4096, "cpu:0"));
            src.segment().fill((byte) 7);
            assertEquals(-1, a.batchTransferSyncWrite(tcp.getLocalSegmentName(), new long[] {src.address()},
                    new long[] {dst.address()}, new long[] {4096}));
            assertEquals(0, dst.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
        }
    }
}
