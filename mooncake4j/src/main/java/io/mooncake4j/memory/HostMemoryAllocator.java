package io.mooncake4j.memory;

import io.mooncake4j.internal.sys.SharedMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Allocates page-aligned host memory with an explicit lifetime.
 *
 * <p>Each allocation has its own shared {@link Arena} (never {@code Arena.ofAuto()}: a NIC or
 * another process may still be using memory the garbage collector cannot see). Allocations can
 * be closed one by one; closing the allocator frees every allocation still alive, newest first.
 * With a {@link HostMemoryPinner} the allocations are also page-locked for a device.
 *
 * <p><b>Shareable memory.</b> An allocation is either private (an {@code Arena} allocation) or
 * shareable: a {@code memfd_create(2)} file sized with {@code ftruncate(2)} and mapped
 * {@code MAP_SHARED}, recorded as a {@link ShareableMemory.Handle} (fd, size, name) so that a
 * process on the same machine can map the same pages and copy with one memcpy (the engine's
 * {@code shm} transport). {@link #allocate} makes private memory unless shareable memory is switched
 * on ({@link #shareableByDefault()}: {@code -Dmooncake4j.memory.shareable=true} or
 * {@code MOONCAKE4J_SHAREABLE_MEMORY=1}; off by default because the demo moved 15 % less KV over
 * memfd pages, docs/shm.md), and then falls back to private memory (one WARN per JVM) where memfd
 * is unusable. {@link #allocateShareable} always shares (fails
 * instead of falling back; {@link #allocatePrivate} never shares. Each shareable allocation holds
 * one file descriptor until it is closed.
 * Thread-safe.
 */
public final class HostMemoryAllocator implements AutoCloseable {

    /** Alignment of every allocation. */
    public static final long PAGE_SIZE = 4096;

    private static final Logger LOG = LoggerFactory.getLogger(HostMemoryAllocator.class);
    private static final AtomicBoolean FALLBACK_WARNED = new AtomicBoolean();
    private static final AtomicLong MEMFD_SEQ = new AtomicLong();

    private final String location;
    private final HostMemoryPinner pinner;
    // insertion-ordered; HostMemoryStorage uses identity equality
    private final Set<HostMemoryStorage> live = new LinkedHashSet<>();
    private boolean closed;

    /** An allocator whose storages report location {@code cpu:0}. */
    public HostMemoryAllocator() {
        this(MemoryLocation.cpu(0));
    }

    /**
     * An allocator whose storages report the given location ({@code cpu:N} or {@code *}).
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     */
    public HostMemoryAllocator(String location) {
        this(location, HostMemoryPinner.NONE);
    }

    /**
     * An allocator whose allocations are pinned by {@code pinner} when allocated and unpinned
     * before they are freed (page-locked memory for device staging).
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     * @param pinner   pins and unpins each allocation
     */
    public HostMemoryAllocator(String location, HostMemoryPinner pinner) {
        this.pinner = Objects.requireNonNull(pinner, "pinner");
        MemoryLocation.validate(location);
        if (MemoryLocation.isCuda(location)) {
            throw new IllegalArgumentException("host allocator cannot report a device location: " + location);
        }
        this.location = location;
    }

    /**
     * Whether {@link #allocate} makes shareable memory: memfd usable here, and switched on with
     * {@code -Dmooncake4j.memory.shareable=true} or {@code MOONCAKE4J_SHAREABLE_MEMORY=1} (off by
     * default: the demo measured 15 % less KV throughput over memfd pages, docs/shm.md).
     *
     * @return whether {@link #allocate} makes shareable memory
     */
    public static boolean shareableByDefault() {
        String prop = System.getProperty("mooncake4j.memory.shareable");
        String env = System.getenv("MOONCAKE4J_SHAREABLE_MEMORY");
        boolean on = "true".equalsIgnoreCase(prop) || "1".equals(env) || "true".equalsIgnoreCase(env);
        return on && SharedMemory.available();
    }

    /**
     * Allocates {@code bytes} zeroed, page-aligned bytes: shareable when
     * {@link #shareableByDefault()} and memfd works, private otherwise.
     *
     * @param bytes the size in bytes
     * @return the new storage; the caller closes it
     */
    public HostMemoryStorage allocate(long bytes) {
        if (!shareableByDefault()) {
            return allocatePrivate(bytes);
        }
        try {
            return allocateShareable(bytes);
        } catch (SharedMemory.SysException e) {
            if (FALLBACK_WARNED.compareAndSet(false, true)) {
                LOG.warn("shareable host memory unavailable, allocating private memory (same-machine peers "
                        + "will not map it): {}", e.getMessage());
            }
            return allocatePrivate(bytes);
        }
    }

    /**
     * Allocates {@code bytes} zeroed, page-aligned, shareable bytes (memfd + {@code MAP_SHARED}).
     *
     * @param bytes the size in bytes
     * @return the new storage; the caller closes it
     * @throws SharedMemory.SysException when memfd, ftruncate or mmap fails (with errno)
     */
    public HostMemoryStorage allocateShareable(long bytes) {
        checkOpen(bytes);
        String name = "mooncake4j-" + ProcessHandle.current().pid() + "-" + MEMFD_SEQ.incrementAndGet();
        long mapped = Math.multiplyExact(Math.ceilDiv(bytes, PAGE_SIZE), PAGE_SIZE);
        int fd = SharedMemory.memfdCreate(name, SharedMemory.MFD_CLOEXEC);
        long addr;
        try {
            SharedMemory.ftruncate(fd, mapped);
            addr = SharedMemory.mmapShared(fd, 0, mapped);
        } catch (RuntimeException e) {
            SharedMemory.close(fd);
            throw e;
        }
        ShareableMemory.Handle handle = new ShareableMemory.Handle(addr, bytes, fd, name);
        Arena arena = Arena.ofShared();
        // the cleanup runs when the arena closes: forget the handle, then unmap and close the fd
        MemorySegment segment = MemorySegment.ofAddress(addr).reinterpret(bytes, arena, s -> {
            ShareableMemory.remove(handle);
            try {
                SharedMemory.munmap(addr, mapped);
            } finally {
                SharedMemory.close(fd);
            }
        });
        ShareableMemory.add(handle);
        return register(arena, segment, handle);
    }

    /**
     * Allocates {@code bytes} zeroed, page-aligned bytes that no other process can map.
     *
     * @param bytes the size in bytes
     * @return the new storage; the caller closes it
     */
    public HostMemoryStorage allocatePrivate(long bytes) {
        checkOpen(bytes);
        Arena arena = Arena.ofShared();
        MemorySegment segment;
        try {
            segment = arena.allocate(bytes, PAGE_SIZE);
        } catch (OutOfMemoryError | RuntimeException e) {
            arena.close();
            throw e;
        }
        return register(arena, segment, null);
    }

    private void checkOpen(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive, got " + bytes);
        }
        synchronized (live) {
            if (closed) {
                throw new IllegalStateException("allocator is closed");
            }
        }
    }

    private HostMemoryStorage register(Arena arena, MemorySegment segment, ShareableMemory.Handle handle) {
        try {
            pinner.pin(segment);
        } catch (OutOfMemoryError | RuntimeException e) {
            arena.close();
            throw e;
        }
        HostMemoryStorage storage = new HostMemoryStorage(this, arena, segment, location, pinner, handle);
        synchronized (live) {
            if (closed) {
                arena.close();
                throw new IllegalStateException("allocator is closed");
            }
            live.add(storage);
        }
        return storage;
    }

    /** {@return bytes currently allocated and not freed} */
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
