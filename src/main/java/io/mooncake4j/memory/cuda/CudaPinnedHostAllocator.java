package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.MemoryLocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Allocates page-locked ("pinned") host memory for GPU staging: bounce buffers for TCP, host
 * KV caches that GPUs copy to and from.
 *
 * <p>Each allocation is a page-aligned {@link Arena} allocation registered with
 * {@code cudaHostRegister(..., cudaHostRegisterPortable)} rather than a {@code cudaHostAlloc}
 * block: the memory is pinned and DMA-able either way, but this way its
 * {@link java.lang.foreign.MemorySegment} is bound to the arena and becomes inaccessible when
 * freed (a {@code cudaHostAlloc} block reaches Java only as a never-invalidated direct buffer,
 * limited to 2 GiB). Storages report the allocator's location ({@code cpu:N} or {@code *}).
 *
 * <p>Constructing the allocator requires CUDA ({@link CudaUnavailableException} otherwise).
 * Closing it frees every allocation still alive, newest first. Thread-safe.
 */
public final class CudaPinnedHostAllocator implements AutoCloseable {

    private final String location;
    private final Set<CudaPinnedHostStorage> live = new LinkedHashSet<>(); // guarded by itself
    private boolean closed; // guarded by live

    /** An allocator whose storages report {@code cpu:0}. */
    public CudaPinnedHostAllocator() {
        this(MemoryLocation.cpu(0));
    }

    /** An allocator whose storages report {@code location} ({@code cpu:N} or {@code *}). */
    public CudaPinnedHostAllocator(String location) {
        MemoryLocation.validate(location);
        if (MemoryLocation.isCuda(location)) {
            throw new IllegalArgumentException("pinned host memory cannot report a device location: " + location);
        }
        CudaAvailability.ensureAvailable();
        this.location = location;
    }

    /** Allocates and pins {@code bytes} zeroed, page-aligned bytes. */
    public CudaPinnedHostStorage allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive, got " + bytes);
        }
        synchronized (live) {
            if (closed) {
                throw new IllegalStateException("allocator is closed");
            }
        }
        Arena arena = Arena.ofShared();
        CudaPinnedHostStorage storage;
        try {
            MemorySegment segment = arena.allocate(bytes, HostMemoryAllocator.PAGE_SIZE);
            Object pointer = JCudaBinding.pointer(segment.address());
            int rc = JCudaBinding.hostRegister(pointer, bytes, JCudaBinding.HOST_REGISTER_PORTABLE);
            if (rc != CudaError.SUCCESS) {
                throw CudaException.failed(String.format(Locale.ROOT, "cudaHostRegister(%d bytes)", bytes), rc,
                        rc == CudaError.MEMORY_ALLOCATION
                                ? "the driver could not page-lock that much memory; allocate less" : "");
            }
            storage = new CudaPinnedHostStorage(this, arena, segment, pointer, location);
        } catch (OutOfMemoryError | RuntimeException e) {
            arena.close();
            throw e;
        }
        synchronized (live) {
            if (!closed) {
                live.add(storage);
                return storage;
            }
        }
        storage.close();
        throw new IllegalStateException("allocator is closed");
    }

    /** Bytes currently allocated and not freed. */
    public long allocatedBytes() {
        synchronized (live) {
            return live.stream().mapToLong(CudaPinnedHostStorage::byteSize).sum();
        }
    }

    void forget(CudaPinnedHostStorage storage) {
        synchronized (live) {
            live.remove(storage);
        }
    }

    /** Frees every live allocation, newest first; the first unregistration error is thrown after all are freed. */
    @Override
    public void close() {
        List<CudaPinnedHostStorage> toFree;
        synchronized (live) {
            if (closed) {
                return;
            }
            closed = true;
            toFree = new ArrayList<>(live);
        }
        Collections.reverse(toFree);
        RuntimeException first = null;
        for (CudaPinnedHostStorage s : toFree) {
            try {
                s.close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
