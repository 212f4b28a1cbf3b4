package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryStorage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** On a host without CUDA, every GPU request fails with the probe's cause; host memory is unaffected. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CudaWithoutGpuTest {

    @BeforeEach
    void onlyWithoutCuda() {
        assumeFalse(CudaAvailability.isAvailable(), "CUDA is available here");
    }

    private static void assertExplains(CudaUnavailableException e) {
        assertEquals(CudaAvailability.reason(), e.reason());
        assertTrue(e.getMessage().contains("CUDA is unavailable"), e.getMessage());
        assertTrue(e.getMessage().contains("Fix:"), e.getMessage());
    }

    @Test
    void cudaLocationFailsTheLocationCheckWithTheCauseAndFix() {
        CudaUnavailableException e = assertThrows(CudaUnavailableException.class,
                () -> CudaAvailability.checkLocation("cuda:0"));
        assertTrue(e.getMessage().startsWith("memory location 'cuda:0' needs a GPU, but CUDA is unavailable"),
                e.getMessage());
        assertExplains(e);
    }

    @Test
    void deviceAllocationFailsWithTheCause() {
        assertExplains(assertThrows(CudaUnavailableException.class, () -> CudaDeviceStorage.allocate(0, 4096)));
        assertExplains(assertThrows(CudaUnavailableException.class,
                () -> CudaDeviceStorage.allocate("cuda:1", 4096)));
    }

    @Test
    void pinnedAllocatorAndStreamsFailWithTheCause() {
        assertExplains(assertThrows(CudaUnavailableException.class, CudaPinnedHostAllocator::new));
        assertExplains(assertThrows(CudaUnavailableException.class, () -> CudaStream.create(0)));
        assertExplains(assertThrows(CudaUnavailableException.class, () -> CudaAvailability.deviceName(0)));
    }

    @Test
    void copiesFailWithTheCause() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            HostMemoryStorage a = alloc.allocate(4096);
            HostMemoryStorage b = alloc.allocate(4096);
            assertExplains(assertThrows(CudaUnavailableException.class,
                    () -> CudaCopies.copy(a.address(), b.address(), 16, CudaCopyKind.HOST_TO_HOST)));
            assertExplains(assertThrows(CudaUnavailableException.class, () -> CudaEvent.create(0)));
        }
    }

    @Test
    void wildcardHostMemoryResolvesToTheHostLocation() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator("*")) {
            HostMemoryStorage s = alloc.allocate(4096);
            assertEquals(-1, CudaPointers.deviceOf(s.address()));
            assertEquals("cpu:1", CudaPointers.resolveLocation(s, "cpu:1"));
            // a declared location is kept as declared
            assertEquals("cuda:3", CudaPointers.resolveLocation(MemoryStorage.of(s.address(), 4096, "cuda:3"), "cpu:0"));
        }
    }
}
