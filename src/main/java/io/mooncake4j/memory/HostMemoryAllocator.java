package io.mooncake4j.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * Allocates page-aligned host memory with an explicit lifetime.
 *
 * <p>Each allocation has its own shared {@link Arena} (never {@code Arena.ofAuto()}: a NIC or
 * another process may still be using memory the garbage collector cannot see). Allocations can
 * be closed one by one; closing the allocator frees every allocation still alive, newest first.
 * With a {@link HostMemoryPinner} the allocations are also page-locked for a device.
 * Thread-safe.
 */
public final class HostMemoryAllocator implements AutoCloseable {

    /** Alignment of every allocation. */
    public static final long PAGE_SIZE = 4096;

    private final String location;
    private final HostMemoryPinner pinner;
    // insertion-ordered; HostMemoryStorage uses identity equality
    private final Set<HostMemoryStorage> live = new LinkedHashSet<>();
    private boolean closed;

    /** An allocator whose storages report location {@code cpu:0}. */
    public HostMemoryAllocator() {
        this(MemoryLocation.cpu(0));
    }

    /** An allocator whose storages report the given location ({@code cpu:N} or {@code *}). */
    public HostMemoryAllocator(String location) {
        this(location, HostMemoryPinner.NONE);
    }

    /**
     * An allocator whose allocations are pinned by {@code pinner} when allocated and unpinned
     * before they are freed (page-locked memory for device staging).
     */
    public HostMemoryAllocator(String location, HostMemoryPinner pinner) {
        this.pinner = Objects.requireNonNull(pinner, "pinner");
        MemoryLocation.validate(location);
        if (MemoryLocation.isCuda(location)) {
            throw new IllegalArgumentException("host allocator cannot report a device location: " + location);
        }
        this.location = location;
    }

    /** Allocates {@code bytes} zeroed, page-aligned bytes. */
    public HostMemoryStorage allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive, got " + bytes);
        }
        synchronized (live) {
            if (closed) {
                throw new IllegalStateException("allocator is closed");
            }
        }
        Arena arena = Arena.ofShared();
        MemorySegment segment;
        try {
            segment = arena.allocate(bytes, PAGE_SIZE);
            pinner.pin(segment);
        } catch (OutOfMemoryError | RuntimeException e) {
            arena.close();
            throw e;
        }
        HostMemoryStorage storage = new HostMemoryStorage(this, arena, segment, location, pinner);
        synchronized (live) {
            if (closed) {
                arena.close();
                throw new IllegalStateException("allocator is closed");
            }
            live.add(storage);
        }
        return storage;
    }

    /** Bytes currently allocated and not freed. */
    public long allocatedBytes() {
        synchronized (live) {
            return live.stream().mapToLong(HostMemoryStorage::byteSize).sum();
        }
    }

    void forget(HostMemoryStorage storage) {
        synchronized (live) {
            live.remove(storage);
        }
    }

    @Override
    public void close() {
        List<HostMemoryStorage> toFree;
        synchronized (live) {
            if (closed) {
                return;
            }
            closed = true;
            toFree = new ArrayList<>(live);
        }
        Collections.reverse(toFree);
        RuntimeException first = null;
        for (HostMemoryStorage s : toFree) {
            try {
                s.close();
            } catch (RuntimeException e) { // an unpin failure; the memory is freed anyway
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
