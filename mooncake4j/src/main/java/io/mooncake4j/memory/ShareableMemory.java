package io.mooncake4j.memory;

import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The process's shareable host allocations: memory from {@link HostMemoryAllocator} that is backed
 * by a {@code memfd} and mapped {@code MAP_SHARED}, so that another process on the same machine
 * can map the same pages through {@code /proc/<pid>/fd/<fd>}.
 *
 * <p>An engine registers memory by address; {@link #find} tells it whether that address lies in a
 * shareable allocation and where (descriptor, offset). Entries are added when an allocation is made
 * and removed before its memory is unmapped. Thread-safe (a concurrent sorted map).
 */
public final class ShareableMemory {

    /**
     * One shareable allocation.
     *
     * @param address  base address of the mapping in this process
     * @param byteSize bytes usable from {@code address} (the file may be a page longer)
     * @param fd       the memfd descriptor in this process (valid while the allocation lives)
     * @param name     the memfd name ({@code /proc/<pid>/fd/<fd>} links to {@code /memfd:<name> (deleted)})
     */
    public record Handle(long address, long byteSize, int fd, String name) {
        /**
         * Checks the handle.
         *
         * @throws IllegalArgumentException when the address is 0, the size not positive or the descriptor negative
         */
        public Handle {
            Objects.requireNonNull(name, "name");
            if (address == 0 || byteSize <= 0 || fd < 0) {
                throw new IllegalArgumentException("invalid shareable handle " + address + "/" + byteSize + "/" + fd);
            }
        }

        /**
         * {@return whether {@code [addr, addr+len)} lies inside this allocation}
         *
         * @param addr the first byte
         * @param len  the number of bytes
         */
        public boolean contains(long addr, long len) {
            return len >= 0 && addr >= address && len <= byteSize && addr - address <= byteSize - len;
        }
    }

    private static final ConcurrentSkipListMap<Long, Handle> LIVE = new ConcurrentSkipListMap<>();

    private ShareableMemory() {}

    /**
     * {@return the shareable allocation that wholly contains {@code [address, address+length)}, if any}
     *
     * @param address the first byte
     * @param length  the number of bytes
     */
    public static Optional<Handle> find(long address, long length) {
        Map.Entry<Long, Handle> e = LIVE.floorEntry(address);
        return e != null && e.getValue().contains(address, length) ? Optional.of(e.getValue()) : Optional.empty();
    }

    /** {@return how many shareable allocations are alive in this process} */
    public static int liveCount() {
        return LIVE.size();
    }

    static void add(Handle h) {
        LIVE.put(h.address(), h);
    }

    static void remove(Handle h) {
        LIVE.remove(h.address(), h);
    }
}
