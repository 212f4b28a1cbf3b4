package io.mooncake4j.connector.wire;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A minimal msgpack encoder writing into a growable byte array, choosing the smallest encoding
 * for every value exactly as {@code msgspec} (and Python {@code msgpack.packb(use_bin_type=True)})
 * do:
 *
 * <table>
 * <caption>formats written</caption>
 * <tr><th>value</th><th>format</th></tr>
 * <tr><td>0..127</td><td>positive fixint</td></tr>
 * <tr><td>128..2^8-1 / ..2^16-1 / ..2^32-1 / ..2^64-1</td><td>uint8 / uint16 / uint32 / uint64</td></tr>
 * <tr><td>-32..-1</td><td>negative fixint</td></tr>
 * <tr><td>-2^7.. / -2^15.. / -2^31.. / -2^63..</td><td>int8 / int16 / int32 / int64</td></tr>
 * <tr><td>double</td><td>float64 (0xcb)</td></tr>
 * <tr><td>string of n UTF-8 bytes</td><td>fixstr (n &lt; 32), str8, str16, str32</td></tr>
 * <tr><td>array / map of n</td><td>fix (n &lt; 16), 16-bit, 32-bit header</td></tr>
 * </table>
 *
 * <p>All multi-byte numbers are big-endian. Not thread-safe; one writer per message.
 */
public final class MsgpackWriter {

    private byte[] buf;
    private int len;
    private final CharsetEncoder utf8 = StandardCharsets.UTF_8.newEncoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);

    public MsgpackWriter() {
        this(256);
    }

    public MsgpackWriter(int initialCapacity) {
        buf = new byte[Math.max(16, initialCapacity)];
    }

    /** Bytes written so far. */
    public int size() {
        return len;
    }

    /** A copy of the bytes written so far. */
    public byte[] toByteArray() {
        return Arrays.copyOf(buf, len);
    }

    private void ensure(int n) {
        if (len + n > buf.length) {
            long want = Math.max((long) buf.length * 2, (long) len + n);
            if (want > Integer.MAX_VALUE - 8) {
                throw new ProtocolException("msgpack message too large: " + want + " bytes");
            }
            buf = Arrays.copyOf(buf, (int) want);
        }
    }

    private void put1(int b) {
        ensure(1);
        buf[len++] = (byte) b;
    }

    private void put2(int prefix, int v) {
        ensure(3);
        buf[len++] = (byte) prefix;
        buf[len++] = (byte) (v >>> 8);
        buf[len++] = (byte) v;
    }

    private void put4(int prefix, int v) {
        ensure(5);
        buf[len++] = (byte) prefix;
        buf[len++] = (byte) (v >>> 24);
        buf[len++] = (byte) (v >>> 16);
        buf[len++] = (byte) (v >>> 8);
        buf[len++] = (byte) v;
    }

    private void put8(int prefix, long v) {
        ensure(9);
        buf[len++] = (byte) prefix;
        for (int shift = 56; shift >= 0; shift -= 8) {
            buf[len++] = (byte) (v >>> shift);
        }
    }

    public MsgpackWriter writeNil() {
        put1(0xc0);
        return this;
    }

    public MsgpackWriter writeBoolean(boolean v) {
        put1(v ? 0xc3 : 0xc2);
        return this;
    }

    /** A signed integer in its smallest form (non-negative values use the unsigned formats). */
    public MsgpackWriter writeInt(long v) {
        if (v >= 0) {
            return writeUnsignedInt(v);
        }
        if (v >= -32) {
            put1((int) v);
        } else if (v >= Byte.MIN_VALUE) {
            ensure(2);
            buf[len++] = (byte) 0xd0;
            buf[len++] = (byte) v;
        } else if (v >= Short.MIN_VALUE) {
            put2(0xd1, (int) v);
        } else if (v >= Integer.MIN_VALUE) {
            put4(0xd2, (int) v);
        } else {
            put8(0xd3, v);
        }
        return this;
    }

    /**
     * An integer read as unsigned 64-bit (so a negative {@code long} is written as a uint64 in
     * 2^63..2^64-1), in its smallest form. Used for addresses.
     */
    public MsgpackWriter writeUnsignedInt(long v) {
        if (v < 0) {
            put8(0xcf, v);
        } else if (v < 128) {
            put1((int) v);
        } else if (v < 256) {
            ensure(2);
            buf[len++] = (byte) 0xcc;
            buf[len++] = (byte) v;
        } else if (v < 65536) {
            put2(0xcd, (int) v);
        } else if (v < (1L << 32)) {
            put4(0xce, (int) v);
        } else {
            put8(0xcf, v);
        }
        return this;
    }

    public MsgpackWriter writeDouble(double v) {
        put8(0xcb, Double.doubleToRawLongBits(v));
        return this;
    }

    /**
     * A UTF-8 string.
     *
     * @throws ProtocolException if the string holds an unpaired surrogate (not valid UTF-8)
     */
    public MsgpackWriter writeString(String s) {
        byte[] bytes;
        if (isAscii(s)) {
            bytes = s.getBytes(StandardCharsets.US_ASCII);
        } else {
            try {
                ByteBuffer bb = utf8.reset().encode(CharBuffer.wrap(s));
                bytes = new byte[bb.remaining()];
                bb.get(bytes);
            } catch (CharacterCodingException e) {
                throw new ProtocolException("cannot encode a string with an unpaired surrogate as UTF-8", e);
            }
        }
        int n = bytes.length;
        if (n < 32) {
            put1(0xa0 | n);
        } else if (n < 256) {
            ensure(2);
            buf[len++] = (byte) 0xd9;
            buf[len++] = (byte) n;
        } else if (n < 65536) {
            put2(0xda, n);
        } else {
            put4(0xdb, n);
        }
        writeRaw(bytes);
        return this;
    }

    private static boolean isAscii(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) >= 0x80) {
                return false;
            }
        }
        return true;
    }

    /** A binary payload (bin8/16/32). */
    public MsgpackWriter writeBinary(byte[] bytes) {
        int n = bytes.length;
        if (n < 256) {
            ensure(2);
            buf[len++] = (byte) 0xc4;
            buf[len++] = (byte) n;
        } else if (n < 65536) {
            put2(0xc5, n);
        } else {
            put4(0xc6, n);
        }
        writeRaw(bytes);
        return this;
    }

    private void writeRaw(byte[] bytes) {
        ensure(bytes.length);
        System.arraycopy(bytes, 0, buf, len, bytes.length);
        len += bytes.length;
    }

    /** An array header; the caller then writes {@code n} values. */
    public MsgpackWriter writeArrayHeader(int n) {
        checkCount(n);
        if (n < 16) {
            put1(0x90 | n);
        } else if (n < 65536) {
            put2(0xdc, n);
        } else {
            put4(0xdd, n);
        }
        return this;
    }

    /** A map header; the caller then writes {@code n} key/value pairs. */
    public MsgpackWriter writeMapHeader(int n) {
        checkCount(n);
        if (n < 16) {
            put1(0x80 | n);
        } else if (n < 65536) {
            put2(0xde, n);
        } else {
            put4(0xdf, n);
        }
        return this;
    }

    private static void checkCount(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("negative msgpack container size " + n);
        }
    }

    /** An array of signed integers. */
    public MsgpackWriter writeIntArray(long[] values) {
        writeArrayHeader(values.length);
        for (long v : values) {
            writeInt(v);
        }
        return this;
    }

    /** An array of unsigned 64-bit integers (see {@link #writeUnsignedInt}). */
    public MsgpackWriter writeUnsignedIntArray(long[] values) {
        writeArrayHeader(values.length);
        for (long v : values) {
            writeUnsignedInt(v);
        }
        return this;
    }
}
