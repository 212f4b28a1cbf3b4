package io.mooncake4j.store.wire;

import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * Reads a struct_pack payload from a frame held in memory. Every length or count read from the
 * bytes is checked against what is left of the frame before anything is allocated for it, so a
 * hostile length (up to 2^64) is a {@link StructPackException}, never an allocation.
 */
public final class StructPackReader {

    private final byte[] buf;
    private final int end;
    private final int width;
    private int pos;

    StructPackReader(byte[] buf, int pos, int end, int width) {
        this.buf = buf;
        this.pos = pos;
        this.end = end;
        this.width = width;
    }

    private void need(long n, String what) {
        if (n > end - pos) {
            throw new StructPackException(String.format(Locale.ROOT,
                    "truncated: %s needs %d bytes at offset %d, %d left", what, n, pos, end - pos));
        }
    }

    /** {@return the bytes not yet read} */
    public int remaining() {
        return end - pos;
    }

    /** {@return one unsigned byte} */
    public int u8() {
        need(1, "u8");
        return buf[pos++] & 0xff;
    }

    /** {@return a bool; anything but 0 or 1 is an error} */
    public boolean bool() {
        int v = u8();
        if (v > 1) {
            throw new StructPackException("bool byte " + v + " at offset " + (pos - 1));
        }
        return v == 1;
    }

    /** {@return a 16-bit unsigned little-endian integer} */
    public int u16() {
        return u8() | (u8() << 8);
    }

    /** {@return a 32-bit little-endian integer} */
    public int i32() {
        need(4, "i32");
        int v = 0;
        for (int i = 0; i < 4; i++) {
            v |= (buf[pos + i] & 0xff) << (8 * i);
        }
        pos += 4;
        return v;
    }

    /** {@return a 64-bit little-endian integer} */
    public long i64() {
        need(8, "i64");
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v |= (buf[pos + i] & 0xffL) << (8 * i);
        }
        pos += 8;
        return v;
    }

    private long rawLength() {
        need(width, "container length");
        long v = 0;
        for (int i = 0; i < width; i++) {
            v |= (buf[pos + i] & 0xffL) << (8 * i);
        }
        pos += width;
        return v;
    }

    /**
     * Reads a container's element count and checks that that many elements of at least
     * {@code minElementBytes} each fit in the rest of the frame.
     *
     * @param minElementBytes the fewest bytes one element occupies (at least 1)
     * @return the count
     */
    public int count(int minElementBytes) {
        long n = rawLength();
        // unsigned: a length of 2^63 or more is negative here and refused the same way
        if (n < 0 || n > (end - pos) / Math.max(1, minElementBytes)) {
            throw new StructPackException(String.format(Locale.ROOT,
                    "container of %s elements (at least %d bytes each) at offset %d, but %d bytes left",
                    Long.toUnsignedString(n), minElementBytes, pos - width, end - pos));
        }
        return (int) n;
    }

    /** {@return a string (UTF-8), its length checked against the frame} */
    public String string() {
        int n = count(1);
        String s = new String(buf, pos, n, StandardCharsets.UTF_8);
        pos += n;
        return s;
    }

    /** Fails unless every byte of the payload was read. */
    public void expectEnd() {
        if (pos != end) {
            throw new StructPackException((end - pos) + " trailing bytes after the value at offset " + pos);
        }
    }
}
