package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The dma-buf export binding where CUDA is unavailable (this build machine), and its pure helpers. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class CudaDmaBufTest {

    @Test
    void rangesWidenToWholePages() {
        assertEquals(0x1000, CudaDmaBuf.alignDown(0x1fff, 4096));
        assertEquals(0x2000, CudaDmaBuf.alignUp(0x1001, 4096));
        assertEquals(0x2000, CudaDmaBuf.alignUp(0x2000, 4096));
        assertEquals(0x10000, CudaDmaBuf.alignDown(0x1ffff, 65536));
    }

    @Test
    void driverResultsAreNamed() {
        assertEquals("CUDA_ERROR_NOT_SUPPORTED (801)", CudaDmaBuf.describe(801));
        assertEquals("CUresult (999)", CudaDmaBuf.describe(999));
    }

    @Test
    void withoutCudaExportReportsTheProbeCauseInsteadOfFailingToLoad() {
        assumeFalse(CudaAvailability.isAvailable(), "CUDA is available here; CudaDmaBufGpuTest covers this host");
        Optional<String> why = CudaDmaBuf.unavailability();
        assertTrue(why.isPresent());
        assertEquals(CudaAvailability.unavailabilityCause().getMessage(), why.get());
        assertEquals(why, CudaDmaBuf.deviceUnsupported(0));
        CudaException e = assertThrows(CudaException.class, () -> CudaDmaBuf.exportRange(0, 0x10000, 4096));
        assertTrue(e.getMessage().startsWith("dma-buf export unavailable: "), e.getMessage());
        assertEquals(-1, CudaDmaBuf.closeFd(-1));
    }
}
