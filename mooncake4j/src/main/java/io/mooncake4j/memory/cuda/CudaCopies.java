package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.MemoryStorage;
import java.util.Locale;

/**
 * Synchronous copies between host memory and GPU memory ({@code cudaMemcpy}). The address
 * variant names its direction ({@link CudaCopyKind}: JCuda does not pass
 * {@code cudaMemcpyDefault} through) and returns the {@code cudaError_t}
 * ({@link CudaError#SUCCESS} is 0), as data-path calls do; it allocates two small JCuda pointer
 * objects per call — use a {@link CudaStream} where that matters. The storage variant works the
 * direction out from the storages' locations ({@code *} is resolved with
 * {@link CudaPointers#deviceOf}) and throws.
 *
 * <p>Callers must have checked {@link CudaAvailability#ensureAvailable()} (directly or by
 * holding a {@link CudaDeviceStorage}); without CUDA these methods throw
 * {@link CudaUnavailableException}. Thread-safe.
 */
public final class CudaCopies {

    private CudaCopies() {}

    /**
     * Copies {@code bytes} from {@code src} to {@code dst} in direction {@code kind} and waits; returns the CUDA error code.
     *
     * @param dst   the destination address
     * @param src   the source address
     * @param bytes the size in bytes
     * @param kind  the copy direction
     * @return the CUDA error code
     */
    public static int copy(long dst, long src, long bytes, CudaCopyKind kind) {
        CudaAvailability.ensureAvailable();
        if (bytes == 0) {
            return CudaError.SUCCESS;
        }
        int rc = JCudaBinding.memcpy(JCudaBinding.pointer(dst), JCudaBinding.pointer(src), bytes, kind.code());
        if (rc == CudaError.SUCCESS && kind == CudaCopyKind.DEVICE_TO_DEVICE) {
            // cudaMemcpy does no host-side synchronisation for device-to-device copies: wait here,
            // so "copy and wait" holds in every direction
            rc = JCudaBinding.deviceSynchronize();
        }
        return rc;
    }

    /**
     * Copies {@code bytes} from {@code src + srcOffset} to {@code dst + dstOffset}; throws
     * {@link IllegalArgumentException} for a range outside either storage and
     * {@link CudaException} when CUDA fails (a convenience for control-path code and tests).
     *
     * @param dst       the destination address
     * @param dstOffset the offset in the destination
     * @param src       the source address
     * @param srcOffset the offset in the source
     * @param bytes     the size in bytes
     */
    public static void copy(MemoryStorage dst, long dstOffset, MemoryStorage src, long srcOffset, long bytes) {
        checkRange(dst, dstOffset, bytes, "destination");
        checkRange(src, srcOffset, bytes, "source");
        CudaCopyKind kind = kindOf(dst, src);
        int rc = copy(dst.address() + dstOffset, src.address() + srcOffset, bytes, kind);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed(String.format(Locale.ROOT, "cudaMemcpy (%s) of %d bytes from %s to %s",
                    kind, bytes, src, dst), rc, "");
        }
    }

    /**
     * {@return the direction of a copy from {@code src} into {@code dst}, by location ({@code *} detected)}
     *
     * @param dst the destination address
     * @param src the source address
     */
    public static CudaCopyKind kindOf(MemoryStorage dst, MemoryStorage src) {
        return CudaCopyKind.of(isDeviceMemory(dst), isDeviceMemory(src));
    }

    /**
     * {@return whether a storage is GPU memory: {@code cuda:N}, or {@code *} at a device address}
     *
     * @param s a storage
     */
    public static boolean isDeviceMemory(MemoryStorage s) {
        if (s.isDevice()) {
            return true;
        }
        return MemoryLocation.WILDCARD.equals(s.location()) && CudaPointers.deviceOf(s.address()) >= 0;
    }

    static void checkRange(MemoryStorage s, long offset, long bytes, String what) {
        if (offset < 0 || bytes < 0 || !s.contains(s.address() + offset, bytes)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "%s range [+%d, +%d bytes) lies outside %s", what, offset, bytes, s));
        }
    }
}
