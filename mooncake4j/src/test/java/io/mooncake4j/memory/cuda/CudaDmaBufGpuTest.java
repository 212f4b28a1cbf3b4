package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * dma-buf export of real GPU memory ({@code cuMemGetHandleForAddressRange} through FFM on
 * {@code libcuda.so.1}): the capability query, an aligned and an unaligned export, closing the
 * descriptor. Needs no NIC. Skipped with the probe's cause where CUDA is unavailable; run by
 * {@code scripts/gpu-check.sh}.
 */
@Tag("gpu")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CudaDmaBufGpuTest {

    @Test
    void gpuMemoryExportsAsDmaBufWhereTheDriverSupportsIt() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
        Optional<String> lib = CudaDmaBuf.unavailability();
        System.out.println("dma-buf binding: " + lib.orElse("libcuda.so.1 has cuMemGetHandleForAddressRange"));
        assertTrue(lib.isEmpty(), () -> lib.orElse(""));
        Optional<String> unsupported = CudaDmaBuf.deviceUnsupported(0);
        System.out.println("GPU 0 dma-buf: " + unsupported.orElse("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 1"));
        try (CudaDeviceStorage gpu = CudaDeviceStorage.allocate(0, 4L << 20)) {
            if (unsupported.isPresent()) {
                CudaException e = assertThrows(CudaException.class,
                        () -> CudaDmaBuf.exportRange(0, gpu.address(), gpu.byteSize()));
                System.out.println("export refused as expected: " + e.getMessage());
                return;
            }
            CudaDmaBuf.Export whole = CudaDmaBuf.exportRange(0, gpu.address(), gpu.byteSize());
            System.out.println("exported " + whole);
            assertTrue(whole.fd() >= 0, whole::toString);
            assertEquals(0, whole.offset(), "cudaMalloc memory starts on a page");
            assertEquals(gpu.address(), whole.base());
            assertEquals(0, CudaDmaBuf.closeFd(whole.fd()));

            CudaDmaBuf.Export inner = CudaDmaBuf.exportRange(0, gpu.address() + 4096 + 100, 8192);
            assertTrue(inner.fd() >= 0, inner::toString);
            assertEquals(100, inner.offset() % 4096);
            assertEquals(gpu.address() + 4096 + 100, inner.base() + inner.offset());
            assertTrue(inner.size() >= 8192 + 100 && inner.base() + inner.size() <= gpu.address() + gpu.byteSize(),
                    inner::toString);
            assertEquals(0, CudaDmaBuf.closeFd(inner.fd()));
        }
    }
}
