package io.mooncake4j.connector.worker.plan;

import java.util.Arrays;

/**
 * A growable, reusable list of transfer descriptors {@code (src, dst, len)} held in three
 * parallel primitive arrays. Appending never boxes and allocates only when the capacity
 * doubles; {@link #clear()} keeps the arrays for the next wave.
 *
 * <p>Not thread-safe: owned by the thread that plans and submits the transfer.
 */
public final class DescriptorBuffer {

    private long[] src;
    private long[] dst;
    private long[] len;
    private int size;
    private long totalBytes;

    public DescriptorBuffer() {
        this(64);
    }

    public DescriptorBuffer(int initialCapacity) {
        if (initialCapacity < 1) {
            throw new IllegalArgumentException("initialCapacity must be >= 1, got " + initialCapacity);
        }
        src = new long[initialCapacity];
        dst = new long[initialCapacity];
        len = new long[initialCapacity];
    }

    /** Appends one descriptor. */
    public void add(long srcAddr, long dstAddr, long length) {
        int i = size;
        if (i == src.length) {
            grow(i + 1);
        }
        src[i] = srcAddr;
        dst[i] = dstAddr;
        len[i] = length;
        size = i + 1;
        totalBytes += length;
    }

    /** Makes room for {@code additional} more descriptors without further growth. */
    public void ensureAdditional(int additional) {
        long needed = (long) size + additional;
        if (needed > src.length) {
            if (needed > Integer.MAX_VALUE - 8) {
                throw new IllegalStateException("too many transfer descriptors: " + needed);
            }
            grow((int) needed);
        }
    }

    private void grow(int minCapacity) {
        int cap = Math.max(minCapacity, (int) Math.min(Integer.MAX_VALUE - 8L, src.length * 2L));
        src = Arrays.copyOf(src, cap);
        dst = Arrays.copyOf(dst, cap);
        len = Arrays.copyOf(len, cap);
    }

    /**
     * For the planner's bulk loops: after {@link #ensureAdditional} and writing entries
     * {@code [size, newSize)} straight into the backing arrays, publishes them.
     */
    void commitRaw(int newSize, long addedBytes) {
        if (newSize < size || newSize > src.length) {
            throw new IndexOutOfBoundsException("newSize " + newSize + " not in [" + size + ", " + src.length + "]");
        }
        size = newSize;
        totalBytes += addedBytes;
    }

    /** Forgets all descriptors, keeping the capacity. */
    public void clear() {
        size = 0;
        totalBytes = 0;
    }

    /** Drops descriptors from index {@code newSize} on (used to roll back a partially planned request). */
    public void truncate(int newSize) {
        if (newSize < 0 || newSize > size) {
            throw new IndexOutOfBoundsException("newSize " + newSize + " not in [0, " + size + "]");
        }
        for (int i = newSize; i < size; i++) {
            totalBytes -= len[i];
        }
        size = newSize;
    }

    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /** Sum of all lengths. */
    public long totalBytes() {
        return totalBytes;
    }

    public long src(int i) {
        return src[checkIndex(i)];
    }

    public long dst(int i) {
        return dst[checkIndex(i)];
    }

    public long len(int i) {
        return len[checkIndex(i)];
    }

    private int checkIndex(int i) {
        return java.util.Objects.checkIndex(i, size);
    }

    /** Backing source array; only the first {@link #size()} entries are valid. */
    public long[] srcArray() {
        return src;
    }

    /** Backing destination array; only the first {@link #size()} entries are valid. */
    public long[] dstArray() {
        return dst;
    }

    /** Backing length array; only the first {@link #size()} entries are valid. */
    public long[] lenArray() {
        return len;
    }

    /** Exactly-sized copy of the sources (for APIs that take whole arrays). */
    public long[] copySrc() {
        return Arrays.copyOf(src, size);
    }

    /** Exactly-sized copy of the destinations. */
    public long[] copyDst() {
        return Arrays.copyOf(dst, size);
    }

    /** Exactly-sized copy of the lengths. */
    public long[] copyLen() {
        return Arrays.copyOf(len, size);
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("DescriptorBuffer[size=").append(size).append(", bytes=")
                .append(totalBytes);
        int shown = Math.min(size, 8);
        for (int i = 0; i < shown; i++) {
            sb.append(i == 0 ? ": " : ", ").append('(').append(src[i]).append(", ").append(dst[i]).append(", ")
                    .append(len[i]).append(')');
        }
        if (size > shown) {
            sb.append(", …");
        }
        return sb.append(']').toString();
    }
}
