package io.mooncake4j.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.internal.sys.SharedMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ShareableHostMemoryTest {

    @BeforeEach
    void linux() {
        assumeTrue(SharedMemory.available(), () -> "memfd unusable here: " + SharedMemory.unavailableReason());
    }

    @Test
    void shareableAllocationIsAMemfdThatASecondMappingSees() throws Exception {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator("cpu:0")) {
            HostMemoryStorage s = alloc.allocateShareable(10_000);
            ShareableMemory.Handle h = s.shareable().orElseThrow();
            assertEquals(s.address(), h.address());
            assertEquals(10_000, h.byteSize());
            assertEquals(0, s.address() % HostMemoryAllocator.PAGE_SIZE);
            Path fdPath = Path.of("/proc/self/fd/" + h.fd());
            assertEquals("/memfd:" + h.name() + " (deleted)", Files.readSymbolicLink(fdPath).toString());
            assertEquals(0, s.segment().get(ValueLayout.JAVA_LONG, 9_992)); // zeroed
            s.segment().set(ValueLayout.JAVA_LONG, 4096, 0x1122334455667788L);
            // a second, independent MAP_SHARED mapping of the same file sees the bytes, both ways
            try (FileChannel ch = FileChannel.open(fdPath, StandardOpenOption.READ, StandardOpenOption.WRITE);
                 Arena a = Arena.ofConfined()) {
                MemorySegment other = ch.map(FileChannel.MapMode.READ_WRITE, 0, 10_000, a);
                assertTrue(other.address() != s.address());
                assertEquals(0x1122334455667788L, other.get(ValueLayout.JAVA_LONG, 4096));
                other.set(ValueLayout.JAVA_INT, 16, 77);
                assertEquals(77, s.segment().get(ValueLayout.JAVA_INT, 16));
            }
            assertEquals(h, ShareableMemory.find(s.address() + 100, 9_900).orElseThrow());
            assertTrue(ShareableMemory.find(s.address() + 100, 9_901).isEmpty());
            s.close();
            assertTrue(ShareableMemory.find(s.address(), 1).isEmpty());
            assertFalse(Files.exists(fdPath, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                    && Files.readSymbolicLink(fdPath).toString().contains(h.name()), "memfd still open after close");
            assertEquals(0, alloc.allocatedBytes());
        }
    }

    @Test
    void privateAllocationsHaveNoHandleAndDefaultFollowsThePolicy() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            HostMemoryStorage p = alloc.allocatePrivate(4096);
            assertTrue(p.shareable().isEmpty());
            assertTrue(ShareableMemory.find(p.address(), 1).isEmpty());
            HostMemoryStorage d = alloc.allocate(4096);
            assertEquals(HostMemoryAllocator.shareableByDefault(), d.shareable().isPresent());
        }
    }

    @Test
    void closingTheAllocatorUnmapsAndClosesEveryShareableAllocation() throws Exception {
        int before = ShareableMemory.liveCount();
        HostMemoryStorage a;
        ShareableMemory.Handle h;
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            a = alloc.allocateShareable(1 << 20);
            alloc.allocateShareable(8192);
            h = a.shareable().orElseThrow();
            assertEquals(before + 2, ShareableMemory.liveCount());
        }
        assertFalse(a.isAlive());
        assertEquals(before, ShareableMemory.liveCount());
        Path fdPath = Path.of("/proc/self/fd/" + h.fd());
        assertFalse(Files.exists(fdPath, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                && Files.readSymbolicLink(fdPath).toString().contains(h.name()));
    }
}
