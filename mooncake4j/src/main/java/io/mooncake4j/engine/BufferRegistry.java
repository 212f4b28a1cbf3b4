package io.mooncake4j.engine;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Objects;

/**
 * The buffers registered with an engine, with Mooncake's registration rules
 * ({@code TransferEngineImpl::registerLocalMemory*}): zero length is
 * {@link ErrorCodes#INVALID_ARGUMENT}; any intersection with a registered buffer, an exact
 * duplicate included, or within one batch is {@link ErrorCodes#ADDRESS_OVERLAPPED}; unregistering
 * anything but the exact base of a buffer is {@link ErrorCodes#ADDRESS_NOT_REGISTERED}.
 *
 * <p>Lookups ({@link #find}) are lock-free reads of an immutable sorted snapshot published
 * through a volatile field; changes are serialised by the registry's monitor. Thread-safe.
 */
public final class BufferRegistry {

    /** An empty registry. */
    public BufferRegistry() {}

    /**
     * One registered buffer.
     *
     * @param address  base virtual address
     * @param length   bytes
     * @param location registration location ({@code "*"}, {@code "cpu:N"}, {@code "cuda:N"})
     */
    public record Buffer(long address, long length, String location) {
        /**
         * Checks the location.
         *
         * @throws NullPointerException when {@code location} is null
         */
        public Buffer {
            Objects.requireNonNull(location, "location");
        }

        /** {@return the exclusive end address, as an unsigned value} */
        public long end() {
            return address + length;
        }

        /**
         * Whether a range lies wholly inside this buffer (unsigned, without overflow).
         *
         * @param addr first address of the range
         * @param len  bytes in the range
         * @return whether {@code [addr, addr+len)} lies inside this buffer
         */
        public boolean contains(long addr, long len) {
            return len >= 0 && Long.compareUnsigned(addr, address) >= 0
                    && Long.compareUnsigned(len, length) <= 0
                    && Long.compareUnsigned(addr - address, length - len) <= 0;
        }
    }

    private static final Buffer[] EMPTY = new Buffer[0];

    // sorted by unsigned address; replaced, never mutated
    private volatile Buffer[] buffers = EMPTY;

    /**
     * Registers one buffer.
     *
     * @param address  base address (not 0)
     * @param length   bytes (positive, not wrapping past the end of the address space)
     * @param location registration location
     * @return 0, {@link ErrorCodes#INVALID_ARGUMENT} or {@link ErrorCodes#ADDRESS_OVERLAPPED}
     */
    public synchronized int register(long address, long length, String location) {
        return registerBatch(new long[] {address}, new long[] {length}, new String[] {location});
    }

    /**
     * Registers all buffers or none.
     *
     * @param addresses base addresses
     * @param lengths   byte lengths, one per address
     * @param locations registration locations, one per address
     * @return 0, {@link ErrorCodes#INVALID_ARGUMENT} (null or unequal arrays, a bad buffer) or
     *         {@link ErrorCodes#ADDRESS_OVERLAPPED}; nothing is registered unless 0
     */
    public synchronized int registerBatch(long[] addresses, long[] lengths, String[] locations) {
        if (addresses == null || lengths == null || locations == null
                || addresses.length != lengths.length || addresses.length != locations.length) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        Buffer[] add = new Buffer[addresses.length];
        for (int i = 0; i < addresses.length; i++) {
            if (lengths[i] <= 0 || addresses[i] == 0 || locations[i] == null
                    || Long.compareUnsigned(addresses[i] + lengths[i], addresses[i]) < 0) {
                return ErrorCodes.INVALID_ARGUMENT;
            }
            add[i] = new Buffer(addresses[i], lengths[i], locations[i]);
        }
        Buffer[] merged = Arrays.copyOf(buffers, buffers.length + add.length);
        System.arraycopy(add, 0, merged, buffers.length, add.length);
        Arrays.sort(merged, Comparator.comparing(Buffer::address, Long::compareUnsigned));
        for (int i = 1; i < merged.length; i++) {
            if (Long.compareUnsigned(merged[i - 1].end(), merged[i].address()) > 0) {
                return ErrorCodes.ADDRESS_OVERLAPPED;
            }
        }
        buffers = merged;
        return ErrorCodes.OK;
    }

    /**
     * Unregisters one buffer.
     *
     * @param address the exact base of a registered buffer
     * @return 0, or {@link ErrorCodes#ADDRESS_NOT_REGISTERED} when no buffer starts there
     */
    public synchronized int unregister(long address) {
        Buffer[] cur = buffers;
        int idx = indexOfBase(cur, address);
        if (idx < 0) {
            return ErrorCodes.ADDRESS_NOT_REGISTERED;
        }
        Buffer[] next = new Buffer[cur.length - 1];
        System.arraycopy(cur, 0, next, 0, idx);
        System.arraycopy(cur, idx + 1, next, idx, cur.length - idx - 1);
        buffers = next;
        return ErrorCodes.OK;
    }

    /**
     * Looks a buffer up by its base.
     *
     * @param address a base address
     * @return the registered buffer based exactly at {@code address}, or null
     */
    public Buffer byBase(long address) {
        Buffer[] cur = buffers;
        int idx = indexOfBase(cur, address);
        return idx < 0 ? null : cur[idx];
    }

    /**
     * Looks up the buffer that holds a range. Lock-free.
     *
     * @param address first address of the range
     * @param length  bytes in the range
     * @return the buffer that wholly contains {@code [address, address+length)}, or null
     */
    public Buffer find(long address, long length) {
        Buffer[] cur = buffers;
        int lo = 0;
        int hi = cur.length - 1;
        int cand = -1;
        while (lo <= hi) { // last buffer whose base <= address
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(cur[mid].address(), address) <= 0) {
                cand = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        if (cand < 0) {
            return null;
        }
        Buffer b = cur[cand];
        return b.contains(address, length) ? b : null;
    }

    /** {@return the registered buffers, sorted by unsigned address (an immutable copy)} */
    public List<Buffer> snapshot() {
        return List.of(buffers);
    }

    /** {@return the number of registered buffers} */
    public int size() {
        return buffers.length;
    }

    /**
     * Removes every buffer.
     *
     * @return what was registered, sorted by address
     */
    public synchronized List<Buffer> clear() {
        List<Buffer> out = new ArrayList<>(List.of(buffers));
        buffers = EMPTY;
        return out;
    }

    private static int indexOfBase(Buffer[] cur, long address) {
        int lo = 0;
        int hi = cur.length - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int c = Long.compareUnsigned(cur[mid].address(), address);
            if (c == 0) {
                return mid;
            }
            if (c < 0) {
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        return -1;
    }
}
