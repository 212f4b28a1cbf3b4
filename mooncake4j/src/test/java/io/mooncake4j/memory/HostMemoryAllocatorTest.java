package io.mooncake4j.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class HostMemoryAllocatorTest {

    @Test
    void allocationsArePageAlignedZeroedAndFreedByClose() {
        HostMemoryStorage a;
        HostMemoryStorage b;
        try (HostMemoryAllocator alloc = new HostMemoryAllocator("cpu:0")) {
            a = alloc.allocate(10_000);
            b = alloc.allocate(4096);
            assertEquals(0, a.address() % HostMemoryAllocator.PAGE_SIZE);
            assertEquals(0, b.address() % HostMemoryAllocator.PAGE_SIZE);
            assertEquals(0, a.segment().get(ValueLayout.JAVA_LONG, 8));
            assertEquals(14_096, alloc.allocatedBytes());
            b.close();
            b.close(); // idempotent
            assertEquals(10_000, alloc.allocatedBytes());
            assertEquals("cpu:0", a.location());
        }
        assertFalse(a.isAlive());
        assertThrows(IllegalStateException.class, a::segment);
    }

    @Test
    void closedAllocatorRefusesToAllocate() {
        HostMemoryAllocator alloc = new HostMemoryAllocator();
        alloc.close();
        alloc.close();
        assertThrows(IllegalStateException.class, () -> alloc.allocate(1));
    }

    @Test
    void locationsAreValidated() {
        assertThrows(IllegalArgumentException.class, () -> new HostMemoryAllocator("gpu0"));
        assertThrows(IllegalArgumentException.class, () -> new HostMemoryAllocator("cuda:0"));
        assertTrue(MemoryLocation.isCuda("cuda:3"));
        assertEquals(3, MemoryLocation.index("cuda:3"));
        assertEquals(-1, MemoryLocation.index("*"));
    }

    @Test
    void pinnerPinsEachAllocationAndUnpinsBeforeFreeing() {
        List<String> events = new ArrayList<>();
        HostMemoryPinner recording = new HostMemoryPinner() {
            @Override
            public void pin(MemorySegment segment) {
                if (segment.byteSize() == 3 * 4096) {
                    throw new IllegalStateException("cannot pin");
                }
                events.add("pin " + segment.byteSize());
            }

            @Override
            public void unpin(MemorySegment segment) {
                events.add("unpin " + segment.byteSize());
                if (segment.byteSize() == 2 * 4096) {
                    throw new IllegalStateException("cannot unpin");
                }
            }
        };
        HostMemoryStorage b;
        try (HostMemoryAllocator alloc = new HostMemoryAllocator("cpu:0", recording)) {
            HostMemoryStorage a = alloc.allocate(4096);
            b = alloc.allocate(2 * 4096);
            assertThrows(IllegalStateException.class, () -> alloc.allocate(3 * 4096));
            assertEquals(3 * 4096, alloc.allocatedBytes(), "a refused allocation is not kept");
            a.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, b::close);
            assertEquals("cannot unpin", e.getMessage());
            assertFalse(b.isAlive(), "freed even though unpinning failed");
            assertEquals(0, alloc.allocatedBytes());
        }
        assertEquals(List.of("pin 4096", "pin 8192", "unpin 4096", "unpin 8192"), events);
    }
}
