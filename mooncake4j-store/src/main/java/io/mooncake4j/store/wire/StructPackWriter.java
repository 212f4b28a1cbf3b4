package io.mooncake4j.store.wire;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Writes a struct_pack payload: little-endian fixed-width integers and container lengths of the
 * message's width. A writer in measuring mode writes nothing and records the longest container,
 * so that {@link StructPack#encode} can choose the width (struct_pack chooses it per message from
 * the longest container or string in it, and applies it to every length).
 */
public final class StructPackWriter {

    private final boolean measuring;
    private final int width;
    private byte[] buf;
    private int pos;
    private long maxLength;

    StructPackWriter(boolean measuring, int width, int capacity) {
        this.measuring = measuring;
        this.width = width;
        this.buf = measuring ? new byte[0] : new byte[Math.max(16, capacity)];
    }

    private void ensure(int n) {
        if (pos + n > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
        }
    }

    /** Writes one byte. */
    public StructPackWriter u8(int v) {
        if (!measuring) {
            ensure(1);
            buf[pos] = (byte) v;
        }
        pos++;
        return this;
    }

    /** Writes a bool as one byte. */
    public StructPackWriter bool(boolean v) {
        return u8(v ? 1 : 0);
    }

    /** Writes a 16-bit little-endian integer. */
    public StructPackWriter u16(int v) {
        return u8(v).u8(v >>> 8);
    }

    /** Writes a 32-bit little-endian integer (int32, uint32, enums). */
    public StructPackWriter i32(int v) {
        if (!measuring) {
            ensure(4);
            for (int i = 0; i < 4; i++) {
                buf[pos + i] = (byte) (v >>> (8 * i));
            }
        }
        pos += 4;
        return this;
    }

    /** Writes a 64-bit little-endian integer (int64, uint64, size_t, uintptr_t). */
    public StructPackWriter i64(long v) {
        if (!measuring) {
            ensure(8);
            for (int i = 0; i < 8; i++) {
                buf[pos + i] = (byte) (v >>> (8 * i));
            }
        }
        pos += 8;
        return this;
    }

    /** Writes a container length (element count, or bytes of a string) in the message's width. */
    public StructPackWriter length(long n) {
        if (n < 0) {
            throw new StructPackException("negative container length " + n);
        }
        maxLength = Math.max(maxLength, n);
        if (measuring) {
            pos += 1;
            return this;
        }
        if (width < 8 && n >= (1L << (8 * width))) {
            throw new StructPackException("length " + n + " does not fit width " + width);
        }
        ensure(width);
        for (int i = 0; i < width; i++) {
            buf[pos + i] = (byte) (n >>> (8 * i));
        }
        pos += width;
        return this;
    }

    /** Writes a string: its UTF-8 byte length then the bytes. */
    public StructPackWriter string(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        length(b.length);
        return raw(b);
    }

    /** Writes bytes as they are. */
    public StructPackWriter raw(byte[] b) {
        if (!measuring) {
            ensure(b.length);
            System.arraycopy(b, 0, buf, pos, b.length);
        }
        pos += b.length;
        return this;
    }

    long maxLength() {
        return maxLength;
    }

    int size() {
        return pos;
    }

    byte[] bytes() {
        return Arrays.copyOf(buf, pos);
    }
}
