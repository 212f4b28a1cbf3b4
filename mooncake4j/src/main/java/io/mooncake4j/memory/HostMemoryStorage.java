package io.mooncake4j.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * Page-aligned host memory from a {@link HostMemoryAllocator}. Closing it frees the memory;
 * closing twice is harmless. Reading {@link #segment()} after close throws
 * {@link IllegalStateException}.
 */
public final class HostMemoryStorage implements MemoryStorage, AutoCloseable {

    private final Arena arena;
    private final MemorySegment segment;
    private final String location;
    private final long address;
    private final long byteSize;
    private final HostMemoryAllocator owner;
    private final HostMemoryPinner pinner;
    private final ShareableMemory.Handle shareable;

    HostMemoryStorage(HostMemoryAllocator owner, Arena arena, MemorySegment segment, String location,
                      HostMemoryPinner pinner, ShareableMemory.Handle shareable) {
        this.owner = owner;
        this.shareable = shareable;
        this.pinner = pinner;
        this.arena = arena;
        this.segment = segment;
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

    /** {@return the whole allocation} */
    public MemorySegment segment() {
        if (!arena.scope().isAlive()) {
            throw new IllegalStateException("host storage at 0x" + Long.toHexString(address) + " was freed");
        }
        return segment;
    }

    @Override
    public Optional<MemorySegment> hostSegment() {
        return Optional.of(segment());
    }

    /**
     * The memfd behind this memory (fd, size, name) when it is shareable with other processes on
     * this machine; empty for private memory. The descriptor is closed when the storage is.
     *
     * @return the memfd behind this memory, empty for private memory
     */
    public Optional<ShareableMemory.Handle> shareable() {
        return Optional.ofNullable(shareable);
    }

    /** {@return whether the memory is still allocated (its arena not yet closed)} */
    public boolean isAlive() {
        return arena.scope().isAlive();
    }

    /** Frees the memory (unpinning it first when pinned); a second call does nothing. */
    @Override
    public void close() {
        synchronized (this) {
            if (!arena.scope().isAlive()) {
                return;
            }
            try {
                pinner.unpin(segment);
            } finally {
                arena.close();
                if (owner != null) {
                    owner.forget(this);
                }
            }
        }
    }

    @Override
    public String toString() {
        return "HostMemoryStorage[0x" + Long.toHexString(address) + ", " + byteSize + " B, " + location
                + (shareable == null ? "" : ", memfd " + shareable.fd()) + "]";
    }
}
