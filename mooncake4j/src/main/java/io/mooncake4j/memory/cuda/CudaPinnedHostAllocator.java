package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryPinner;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryLocation;
import java.lang.foreign.MemorySegment;
import java.util.Locale;

/**
 * Allocates page-locked ("pinned") host memory for GPU staging: bounce buffers for TCP, host
 * KV caches that GPUs copy to and from.
 *
 * <p>A {@link HostMemoryAllocator} whose allocations are registered with
 * {@code cudaHostRegister(..., cudaHostRegisterPortable)} rather than taken from
 * {@code cudaHostAlloc}: the memory is pinned and DMA-able either way, but this way its
 * {@link MemorySegment} is bound to an arena and becomes inaccessible when freed (a
 * {@code cudaHostAlloc} block reaches Java only as a never-invalidated direct buffer, limited to
 * 2 GiB). Closing a storage unregisters it, then frees it; a failed {@code cudaHostUnregister}
 * is thrown as {@link CudaException} after the memory was freed. Storages report the
 * allocator's location ({@code cpu:N} or {@code *}).
 *
 * <p>Constructing the allocator requires CUDA ({@link CudaUnavailableException} otherwise).
 * Closing it frees every allocation still alive, newest first. Thread-safe.
 */
public final class CudaPinnedHostAllocator implements AutoCloseable {

    /** Pins with {@code cudaHostRegister}, unpins with {@code cudaHostUnregister}. */
    private static final HostMemoryPinner CUDA_HOST_REGISTER = new HostMemoryPinner() {
        @Override
        public void pin(MemorySegment segment) {
            int rc = JCudaBinding.hostRegister(JCudaBinding.pointer(segment.address()), segment.byteSize(),
                    JCudaBinding.HOST_REGISTER_PORTABLE);
            if (rc != CudaError.SUCCESS) {
                throw CudaException.failed(String.format(Locale.ROOT, "cudaHostRegister(%d bytes)", segment.byteSize()),
                        rc, rc == CudaError.MEMORY_ALLOCATION
                                ? "the driver could not page-lock that much memory; allocate less" : "");
            }
        }

        @Override
        public void unpin(MemorySegment segment) {
            int rc = JCudaBinding.hostUnregister(JCudaBinding.pointer(segment.address()));
            if (rc != CudaError.SUCCESS) {
                throw CudaException.failed(String.format(Locale.ROOT, "cudaHostUnregister(0x%x)", segment.address()),
                        rc, "");
            }
        }
    };

    private final HostMemoryAllocator delegate;

    /** An allocator whose storages report {@code cpu:0}. */
    public CudaPinnedHostAllocator() {
        this(MemoryLocation.cpu(0));
    }

    /**
     * An allocator whose storages report {@code location} ({@code cpu:N} or {@code *}).
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     */
    public CudaPinnedHostAllocator(String location) {
        MemoryLocation.validate(location);
        if (MemoryLocation.isCuda(location)) {
            throw new IllegalArgumentException("pinned host memory cannot report a device location: " + location);
        }
        CudaAvailability.ensureAvailable();
        this.delegate = new HostMemoryAllocator(location, CUDA_HOST_REGISTER);
    }

    /**
     * Allocates and pins {@code bytes} zeroed, page-aligned bytes.
     *
     * @param bytes the size in bytes
     * @return the new storage; the caller closes it
     */
    public HostMemoryStorage allocate(long bytes) {
        return delegate.allocate(bytes);
    }

    /** {@return bytes currently allocated and not freed} */
    public long allocatedBytes() {
        return delegate.allocatedBytes();
    }

    /** Frees every live allocation, newest first; the first unregistration error is thrown after all are freed. */
    @Override
    public void close() {
        delegate.close();
    }
}
