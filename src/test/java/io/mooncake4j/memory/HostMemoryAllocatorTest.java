package io.mooncake4j.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
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
}
