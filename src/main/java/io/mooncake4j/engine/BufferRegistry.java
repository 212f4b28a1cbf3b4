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

    /**
     * One registered buffer.
     *
     * @param address  base virtual address
     * @param length   bytes
     * @param location registration location ({@code "*"}, {@code "cpu:N"}, {@code "cuda:N"})
     */
    public record Buffer(long address, long length, String location) {
        public Buffer {
            Objects.requireNonNull(location, "location");
        }

        /** Exclusive end, as an unsigned value. */
        public long end() {
            return address + length;
        }

        /** Whether {@code [addr, addr+len)} lies inside this buffer (no overflow). */
        public boolean contains(long addr, long len) {
            return len >= 0 && Long.compareUnsigned(addr, address) >= 0
                    && Long.compareUnsigned(len, length) <= 0
                    && Long.compareUnsigned(addr - address, length - len) <= 0;
        }
    }

    private static final Buffer[] EMPTY = new Buffer[0];

    // sorted by unsigned address; replaced, never mutated
    private volatile Buffer[] buffers = EMPTY;

    /** Registers one buffer; returns 0 or a negative {@link ErrorCodes} value. */
    public synchronized int register(long address, long length, String location) {
        return registerBatch(new long[] {address}, new long[] {length}, new String[] {location});
    }

    /** Registers all buffers or none; returns 0 or a negative {@link ErrorCodes} value. */
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

    /** Unregisters the buffer based at {@code address}; returns 0 or {@link ErrorCodes#ADDRESS_NOT_REGISTERED}. */
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

    /** The registered buffer based exactly at {@code address}, or null. */
    public Buffer byBase(long address) {
        Buffer[] cur = buffers;
        int idx = indexOfBase(cur, address);
        return idx < 0 ? null : cur[idx];
    }

    /** The buffer that wholly contains {@code [address, address+length)}, or null. Lock-free. */
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

    /** The registered buffers, sorted by address. */
    public List<Buffer> snapshot() {
        return List.of(buffers);
    }

    public int size() {
        return buffers.length;
    }

    /** Removes every buffer; returns what was registered. */
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
