package io.mooncake4j.store;

import java.util.Map;
import java.util.TreeMap;

/**
 * First-fit allocation of ranges of the client's registered local buffer, for the copying
 * put/get (Mooncake's client buffer allocator does the same job). Ranges are 64-byte aligned;
 * freed neighbours are merged. Thread-safe.
 */
final class StagingBuffer {

    private static final long ALIGN = 64;

    private final long base;
    private final long size;
    // free ranges: offset -> length, non-adjacent
    private final TreeMap<Long, Long> free = new TreeMap<>();

    StagingBuffer(long base, long size) {
        this.base = base;
        this.size = size;
        if (size > 0) {
            free.put(0L, size);
        }
    }

    /** {@return an address of {@code len} bytes inside the buffer, or -1 when none is free} */
    synchronized long allocate(long len) {
        long need = (Math.max(1, len) + ALIGN - 1) & -ALIGN;
        for (Map.Entry<Long, Long> e : free.entrySet()) {
            if (e.getValue() >= need) {
                long off = e.getKey();
                free.remove(off);
                if (e.getValue() > need) {
                    free.put(off + need, e.getValue() - need);
                }
                return base + off;
            }
        }
        return -1;
    }

    /** Gives back a range from {@link #allocate} of the same {@code len}. */
    synchronized void release(long address, long len) {
        long off = address - base;
        long n = (Math.max(1, len) + ALIGN - 1) & -ALIGN;
        if (off < 0 || off + n > size) {
            throw new IllegalArgumentException("range not in the staging buffer");
        }
        Map.Entry<Long, Long> next = free.ceilingEntry(off);
        if (next != null && next.getKey() == off + n) {
            free.remove(next.getKey());
            n += next.getValue();
        }
        Map.Entry<Long, Long> prev = free.floorEntry(off);
        if (prev != null && prev.getKey() + prev.getValue() == off) {
            free.put(prev.getKey(), prev.getValue() + n);
        } else {
            free.put(off, n);
        }
    }

    /** {@return free bytes (for tests)} */
    synchronized long freeBytes() {
        return free.values().stream().mapToLong(Long::longValue).sum();
    }
}
