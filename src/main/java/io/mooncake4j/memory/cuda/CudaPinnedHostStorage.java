package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.MemoryStorage;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * Page-locked host memory from a {@link CudaPinnedHostAllocator}: a page-aligned allocation of
 * its own {@link Arena}, registered with {@code cudaHostRegister} (portable to every device), so
 * GPU copies to and from it run by DMA and can be asynchronous. Closing unregisters it, then
 * frees it (after which {@link #segment()} throws); closing twice is harmless. Thread-safe.
 */
public final class CudaPinnedHostStorage implements MemoryStorage, AutoCloseable {

    private final CudaPinnedHostAllocator owner;
    private final Arena arena;
    private final MemorySegment segment;
    private final Object pointer; // jcuda.Pointer at the base, for cudaHostUnregister
    private final String location;
    private final long address;
    private final long byteSize;

    CudaPinnedHostStorage(CudaPinnedHostAllocator owner, Arena arena, MemorySegment segment, Object pointer,
                          String location) {
        this.owner = owner;
        this.arena = arena;
        this.segment = segment;
        this.pointer = pointer;
        this.location = location;
        this.address = segment.address();
        this.byteSize = segment.byteSize();
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long byteSize() {
        return byteSize;
    }

    @Override
    public String location() {
        return location;
    }

    /** The whole allocation. */
    public MemorySegment segment() {
        if (!arena.scope().isAlive()) {
            throw new IllegalStateException(this + " was freed");
        }
        return segment;
    }

    @Override
    public Optional<MemorySegment> hostSegment() {
        return Optional.of(segment());
    }

    public boolean isAlive() {
        return arena.scope().isAlive();
    }

    /** Unregisters and frees; throws {@link CudaException} if {@code cudaHostUnregister} fails (the memory is freed anyway). */
    @Override
    public void close() {
        int rc;
        synchronized (this) {
            if (!arena.scope().isAlive()) {
                return;
            }
            rc = JCudaBinding.hostUnregister(pointer);
            arena.close();
        }
        owner.forget(this);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaHostUnregister of " + this, rc, "");
        }
    }

    @Override
    public String toString() {
        return "CudaPinnedHostStorage[0x" + Long.toHexString(address) + ", " + byteSize + " B, " + location + "]";
    }
}
