package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.MemoryStorage;
import java.util.Locale;

/**
 * Synchronous copies between any two of host memory and GPU memory ({@code cudaMemcpy} with
 * {@code cudaMemcpyDefault}: unified addressing infers the direction, so one call covers
 * host-to-device, device-to-host, device-to-device and peer copies). Each call returns the
 * {@code cudaError_t} ({@link CudaError#SUCCESS} is 0), as data-path calls do; each allocates
 * two small JCuda pointer objects — use a {@link CudaStream} where that matters.
 *
 * <p>Callers must have checked {@link CudaAvailability#ensureAvailable()} (directly or by
 * holding a {@link CudaDeviceStorage}); without CUDA these methods throw
 * {@link CudaUnavailableException}. Thread-safe.
 */
public final class CudaCopies {

    private CudaCopies() {}

    /** Copies {@code bytes} from {@code src} to {@code dst} and waits; returns the CUDA error code. */
    public static int copy(long dst, long src, long bytes) {
        CudaAvailability.ensureAvailable();
        if (bytes == 0) {
            return CudaError.SUCCESS;
        }
        return JCudaBinding.memcpy(JCudaBinding.pointer(dst), JCudaBinding.pointer(src), bytes);
    }

    /**
     * Copies {@code bytes} from {@code src + srcOffset} to {@code dst + dstOffset}; throws
     * {@link IllegalArgumentException} for a range outside either storage and
     * {@link CudaException} when CUDA fails (a convenience for control-path code and tests).
     */
    public static void copy(MemoryStorage dst, long dstOffset, MemoryStorage src, long srcOffset, long bytes) {
        checkRange(dst, dstOffset, bytes, "destination");
        checkRange(src, srcOffset, bytes, "source");
        int rc = copy(dst.address() + dstOffset, src.address() + srcOffset, bytes);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed(String.format(Locale.ROOT, "cudaMemcpy of %d bytes from %s to %s",
                    bytes, src, dst), rc, "");
        }
    }

    static void checkRange(MemoryStorage s, long offset, long bytes, String what) {
        if (offset < 0 || bytes < 0 || !s.contains(s.address() + offset, bytes)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "%s range [+%d, +%d bytes) lies outside %s", what, offset, bytes, s));
        }
    }
}
