package io.mooncake4j.connector.wire;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * A msgpack decoder over one message held in a byte array, safe on hostile input.
 *
 * <p>Every read checks the bytes that remain before touching them; a declared string or binary
 * length must fit in the remaining bytes, and a declared array (map) length may not exceed the
 * remaining bytes (half of them), since every element takes at least one byte. Lengths are also
 * bounded by {@link MsgpackLimits}, and generic values ({@link #readValue()}, {@link #skipValue()})
 * by the depth limit, so no forged length leads to a large allocation and no nesting to a deep
 * recursion. Strings must be valid UTF-8. Every malformation raises {@link ProtocolException}
 * naming the byte offset; no other exception escapes a read.
 *
 * <p>Not thread-safe; one reader per message.
 */
public final class MsgpackReader {

    private final byte[] data;
    private final int end;
    private final MsgpackLimits limits;
    private int pos;
    private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);

    public MsgpackReader(byte[] data) {
        this(data, MsgpackLimits.DEFAULT);
    }

    public MsgpackReader(byte[] data, MsgpackLimits limits) {
        this.data = Objects.requireNonNull(data, "data");
        this.end = data.length;
        this.limits = Objects.requireNonNull(limits, "limits");
    }

    /** Offset of the next byte to read. */
    public int position() {
        return pos;
    }

    public int remaining() {
        return end - pos;
    }

    public boolean hasRemaining() {
        return pos < end;
    }

    /** Fails unless the whole input has been consumed. */
    public void expectEnd() {
        if (pos != end) {
            throw malformed(pos, "trailing bytes after the message (" + (end - pos) + " left)");
        }
    }

    private ProtocolException malformed(int at, String what) {
        return new ProtocolException(String.format(Locale.ROOT, "malformed msgpack at byte %d: %s", at, what));
    }

    private void need(int n) {
        if (n < 0 || end - pos < n) {
            throw malformed(pos, "truncated input (need " + n + " bytes, " + (end - pos) + " left)");
        }
    }

    private int u8() {
        need(1);
        return data[pos++] & 0xff;
    }

    private int u16() {
        need(2);
        int v = ((data[pos] & 0xff) << 8) | (data[pos + 1] & 0xff);
        pos += 2;
        return v;
    }

    private long u32() {
        need(4);
        long v = ((long) (data[pos] & 0xff) << 24) | ((data[pos + 1] & 0xff) << 16)
                | ((data[pos + 2] & 0xff) << 8) | (data[pos + 3] & 0xff);
        pos += 4;
        return v;
    }

    private long u64() {
        need(8);
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (data[pos + i] & 0xff);
        }
        pos += 8;
        return v;
    }

    /** The family of the next value, without consuming it. */
    public MsgpackType peekType() {
        need(1);
        MsgpackType t = MsgpackType.ofFormat(data[pos]);
        if (t == null) {
            throw malformed(pos, "invalid format byte 0xc1");
        }
        return t;
    }

    /** Consumes a nil if one is next. */
    public boolean tryReadNil() {
        need(1);
        if ((data[pos] & 0xff) == 0xc0) {
            pos++;
            return true;
        }
        return false;
    }

    private ProtocolException wrongType(int at, String expected) {
        MsgpackType t = MsgpackType.ofFormat(data[at]);
        return malformed(at, "expected " + expected + ", got " + (t == null ? "format byte 0xc1"
                : t.name().toLowerCase(Locale.ROOT)));
    }

    public void readNil() {
        if (!tryReadNil()) {
            throw wrongType(pos, "nil");
        }
    }

    public boolean readBoolean() {
        need(1);
        int b = data[pos] & 0xff;
        if (b == 0xc2 || b == 0xc3) {
            pos++;
            return b == 0xc3;
        }
        throw wrongType(pos, "bool");
    }

    /**
     * Reads an integer of any msgpack integer format into two's complement 64 bits; a uint64 at or
     * above 2^63 is returned as a negative number and flagged by {@code unsignedOverflow[0]}.
     */
    private long rawInt(boolean[] unsignedOverflow) {
        int start = pos;
        int b = u8();
        if (b <= 0x7f) {
            return b;
        }
        if (b >= 0xe0) {
            return (byte) b;
        }
        return switch (b) {
            case 0xcc -> u8();
            case 0xcd -> u16();
            case 0xce -> u32();
            case 0xcf -> {
                long v = u64();
                unsignedOverflow[0] = v < 0;
                yield v;
            }
            case 0xd0 -> (byte) u8();
            case 0xd1 -> (short) u16();
            case 0xd2 -> (int) u32();
            case 0xd3 -> u64();
            default -> {
                pos = start;
                throw wrongType(start, "int");
            }
        };
    }

    /** A signed 64-bit integer; a uint64 above {@link Long#MAX_VALUE} is rejected. */
    public long readLong() {
        int start = pos;
        boolean[] over = new boolean[1];
        long v = rawInt(over);
        if (over[0]) {
            throw malformed(start, "integer " + Long.toUnsignedString(v) + " does not fit in a signed 64-bit value");
        }
        return v;
    }

    /**
     * A non-negative integer up to 2^64-1, returned as its 64-bit pattern (values at or above
     * 2^63 come back negative; read them with {@link Long#toUnsignedString}). Negative values are
     * rejected.
     */
    public long readUnsignedLong() {
        int start = pos;
        boolean[] over = new boolean[1];
        long v = rawInt(over);
        if (v < 0 && !over[0]) {
            throw malformed(start, "expected a non-negative integer, got " + v);
        }
        return v;
    }

    /** A signed integer that must fit in 32 bits. */
    public int readInt() {
        int start = pos;
        long v = readLong();
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw malformed(start, "integer " + v + " does not fit in 32 bits");
        }
        return (int) v;
    }

    /** A float32 or float64 (an integer is accepted too, as msgspec does for {@code float} fields). */
    public double readDouble() {
        need(1);
        int b = data[pos] & 0xff;
        if (b == 0xca) {
            pos++;
            return Float.intBitsToFloat((int) u32());
        }
        if (b == 0xcb) {
            pos++;
            return Double.longBitsToDouble(u64());
        }
        if (MsgpackType.ofFormat(b) == MsgpackType.INTEGER) {
            boolean[] over = new boolean[1];
            long v = rawInt(over);
            return over[0] ? Double.parseDouble(Long.toUnsignedString(v)) : v;
        }
        throw wrongType(pos, "float");
    }

    private int checkedLength(int at, long n, String what) {
        if (n > limits.maxStringBytes()) {
            throw malformed(at, what + " of " + n + " bytes exceeds the limit of " + limits.maxStringBytes());
        }
        if (n > end - pos) {
            throw malformed(at, what + " of " + n + " bytes but only " + (end - pos) + " bytes left");
        }
        return (int) n;
    }

    /** A UTF-8 string (fixstr, str8/16/32). */
    public String readString() {
        int start = pos;
        need(1);
        int b = data[pos] & 0xff;
        long n;
        if (b >= 0xa0 && b <= 0xbf) {
            pos++;
            n = b & 0x1f;
        } else if (b == 0xd9) {
            pos++;
            n = u8();
        } else if (b == 0xda) {
            pos++;
            n = u16();
        } else if (b == 0xdb) {
            pos++;
            n = u32();
        } else {
            throw wrongType(pos, "str");
        }
        int len = checkedLength(start, n, "string");
        String s = decodeUtf8(start, len);
        pos += len;
        return s;
    }

    private String decodeUtf8(int at, int len) {
        boolean ascii = true;
        for (int i = pos; i < pos + len; i++) {
            if (data[i] < 0) {
                ascii = false;
                break;
            }
        }
        if (ascii) {
            return new String(data, pos, len, StandardCharsets.US_ASCII);
        }
        try {
            return utf8.reset().decode(ByteBuffer.wrap(data, pos, len)).toString();
        } catch (CharacterCodingException e) {
            throw malformed(at, "string is not valid UTF-8");
        }
    }

    /** A binary payload (bin8/16/32). */
    public byte[] readBinary() {
        int start = pos;
        need(1);
        int b = data[pos] & 0xff;
        long n = switch (b) {
            case 0xc4 -> {
                pos++;
                yield u8();
            }
            case 0xc5 -> {
                pos++;
                yield u16();
            }
            case 0xc6 -> {
                pos++;
                yield u32();
            }
            default -> throw wrongType(pos, "bin");
        };
        int len = checkedLength(start, n, "binary");
        byte[] out = new byte[len];
        System.arraycopy(data, pos, out, 0, len);
        pos += len;
        return out;
    }

    private int checkedCount(int at, long n, int bytesPerEntry, String what) {
        if (n > limits.maxContainerEntries()) {
            throw malformed(at, what + " of " + n + " entries exceeds the limit of " + limits.maxContainerEntries());
        }
        if (n * bytesPerEntry > end - pos) {
            throw malformed(at, what + " of " + n + " entries cannot fit in the " + (end - pos) + " bytes left");
        }
        return (int) n;
    }

    /** An array header: the number of elements that follow. */
    public int readArrayHeader() {
        int start = pos;
        need(1);
        int b = data[pos] & 0xff;
        long n;
        if (b >= 0x90 && b <= 0x9f) {
            pos++;
            n = b & 0x0f;
        } else if (b == 0xdc) {
            pos++;
            n = u16();
        } else if (b == 0xdd) {
            pos++;
            n = u32();
        } else {
            throw wrongType(pos, "array");
        }
        return checkedCount(start, n, 1, "array");
    }

    /** A map header: the number of key/value pairs that follow. */
    public int readMapHeader() {
        int start = pos;
        need(1);
        int b = data[pos] & 0xff;
        long n;
        if (b >= 0x80 && b <= 0x8f) {
            pos++;
            n = b & 0x0f;
        } else if (b == 0xde) {
            pos++;
            n = u16();
        } else if (b == 0xdf) {
            pos++;
            n = u32();
        } else {
            throw wrongType(pos, "map");
        }
        return checkedCount(start, n, 2, "map");
    }

    /** Skips one value of any type, nested values included (depth-limited). */
    public void skipValue() {
        skip(1);
    }

    private void checkDepth(int depth) {
        if (depth > limits.maxDepth()) {
            throw malformed(pos, "nesting deeper than " + limits.maxDepth());
        }
    }

    private void skip(int depth) {
        checkDepth(depth);
        switch (peekType()) {
            case NIL -> pos++;
            case BOOLEAN -> pos++;
            case INTEGER -> rawInt(new boolean[1]);
            case FLOAT -> readDouble();
            case STRING -> skipBytesOf(readStringLength());
            case BINARY -> readBinaryLengthAndSkip();
            case ARRAY -> {
                int n = readArrayHeader();
                for (int i = 0; i < n; i++) {
                    skip(depth + 1);
                }
            }
            case MAP -> {
                int n = readMapHeader();
                for (int i = 0; i < n; i++) {
                    skip(depth + 1);
                    skip(depth + 1);
                }
            }
            case EXTENSION -> readExtension();
        }
    }

    private int readStringLength() {
        int start = pos;
        int b = u8();
        long n;
        if (b >= 0xa0 && b <= 0xbf) {
            n = b & 0x1f;
        } else if (b == 0xd9) {
            n = u8();
        } else if (b == 0xda) {
            n = u16();
        } else {
            n = u32();
        }
        return checkedLength(start, n, "string");
    }

    private void skipBytesOf(int n) {
        need(n);
        pos += n;
    }

    private void readBinaryLengthAndSkip() {
        int start = pos;
        int b = u8();
        long n = b == 0xc4 ? u8() : b == 0xc5 ? u16() : u32();
        skipBytesOf(checkedLength(start, n, "binary"));
    }

    /** Reads an extension value (type byte and payload); returns it as {@link Extension}. */
    private Extension readExtension() {
        int start = pos;
        int b = u8();
        long n = switch (b) {
            case 0xd4 -> 1;
            case 0xd5 -> 2;
            case 0xd6 -> 4;
            case 0xd7 -> 8;
            case 0xd8 -> 16;
            case 0xc7 -> u8();
            case 0xc8 -> u16();
            case 0xc9 -> u32();
            default -> {
                pos = start;
                throw wrongType(start, "ext");
            }
        };
        need(1);
        int type = data[pos++];
        int len = checkedLength(start, n, "extension");
        byte[] payload = new byte[len];
        System.arraycopy(data, pos, payload, 0, len);
        pos += len;
        return new Extension(type, payload);
    }

    /** A msgpack extension value as read by {@link #readValue()}. */
    public record Extension(int type, byte[] payload) {
    }

    /**
     * Reads one value of any type: {@code null}, {@code Boolean}, {@code Long} (a uint64 above
     * 2^63-1 as {@link java.math.BigInteger}), {@code Double}, {@code String}, {@code byte[]},
     * {@code List<Object>}, insertion-ordered {@code Map<Object,Object>}, or {@link Extension}.
     */
    public Object readValue() {
        return value(1);
    }

    private Object value(int depth) {
        checkDepth(depth);
        return switch (peekType()) {
            case NIL -> {
                pos++;
                yield null;
            }
            case BOOLEAN -> readBoolean();
            case INTEGER -> {
                boolean[] over = new boolean[1];
                long v = rawInt(over);
                yield over[0] ? (Object) new java.math.BigInteger(Long.toUnsignedString(v)) : (Object) v;
            }
            case FLOAT -> readDouble();
            case STRING -> readString();
            case BINARY -> readBinary();
            case ARRAY -> {
                int n = readArrayHeader();
                List<Object> l = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    l.add(value(depth + 1));
                }
                yield l;
            }
            case MAP -> {
                int n = readMapHeader();
                Map<Object, Object> m = LinkedHashMap.newLinkedHashMap(n);
                for (int i = 0; i < n; i++) {
                    Object k = value(depth + 1);
                    if (k instanceof List<?> || k instanceof Map<?, ?> || k instanceof byte[]) {
                        throw malformed(pos, "unsupported map key type " + k.getClass().getSimpleName());
                    }
                    m.put(k, value(depth + 1));
                }
                yield m;
            }
            case EXTENSION -> readExtension();
        };
    }
}
