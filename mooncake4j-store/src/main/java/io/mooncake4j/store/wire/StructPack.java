package io.mooncake4j.store.wire;

import java.util.Arrays;
import java.util.Locale;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * One struct_pack message: a 4-byte little-endian type hash whose low bit says a meta byte
 * follows; the meta byte (bits 0-1: a compatible-size field, which none of the master's types
 * has; bit 2: a NUL-terminated type literal follows; bits 3-4: the width of every container length,
 * 1, 2, 4 or 8 bytes); then the payload. We send the compact form (no literal, a meta byte only
 * when a length needs more than one byte) and accept both; a literal that is present must equal
 * ours.
 */
public final class StructPack {

    private StructPack() {}

    /**
     * Encodes a message whose root type is {@code type} and whose payload {@code body} writes.
     *
     * @param type the root type (a parameter list is a struct of the parameters)
     * @param body writes the payload; called twice (measure, then write)
     * @return hash, optional meta byte, payload
     */
    public static byte[] encode(SpType type, Consumer<StructPackWriter> body) {
        StructPackWriter m = new StructPackWriter(true, 1, 0);
        body.accept(m);
        long max = m.maxLength();
        int widthCode = max < (1L << 8) ? 0 : max < (1L << 16) ? 1 : max < (1L << 32) ? 2 : 3;
        int width = 1 << widthCode;
        StructPackWriter w = new StructPackWriter(false, width, m.size() + 64);
        int hash = type.hash();
        if (widthCode == 0) {
            w.i32(hash);
        } else {
            w.i32(hash | 1);
            w.u8(widthCode << 3);
        }
        body.accept(w);
        return w.bytes();
    }

    /**
     * Decodes a message whose root must be {@code type}.
     *
     * @param frame the bytes holding the message
     * @param off   where it starts
     * @param len   its length (the message must use all of it)
     * @param type  the expected root type
     * @param body  reads the payload
     * @param <T>   what the body returns
     * @return what {@code body} read
     * @throws StructPackException on a wrong hash or literal, an unsupported meta byte, a
     *         truncated or over-long payload, or any length that exceeds the frame
     */
    public static <T> T decode(byte[] frame, int off, int len, SpType type, Function<StructPackReader, T> body) {
        StructPackReader head = new StructPackReader(frame, off, off + len, 1);
        int hash = head.i32();
        int expected = type.hash();
        if ((hash & 0xFFFFFFFE) != expected) {
            throw new StructPackException(String.format(Locale.ROOT,
                    "type hash %08x, expected %08x (literal %s): the peer's type differs", hash & 0xFFFFFFFE,
                    expected, SpType.hex(type.literal())));
        }
        int width = 1;
        int pos = off + 4;
        if ((hash & 1) != 0) {
            int meta = head.u8();
            pos++;
            if ((meta & 0b11) != 0) {
                throw new StructPackException("meta byte " + meta + " announces a compatible-size field, which this type has not");
            }
            if ((meta & ~0b11111) != 0) {
                throw new StructPackException("meta byte " + meta + " has unknown bits");
            }
            if ((meta & 0b100) != 0) {
                byte[] lit = type.literal();
                int nul = -1;
                for (int i = pos; i < off + len; i++) {
                    if (frame[i] == 0) {
                        nul = i;
                        break;
                    }
                }
                if (nul < 0) {
                    throw new StructPackException("type literal without its NUL terminator");
                }
                if (!Arrays.equals(frame, pos, nul, lit, 0, lit.length)) {
                    throw new StructPackException("type literal " + SpType.hex(Arrays.copyOfRange(frame, pos, nul))
                            + ", expected " + SpType.hex(lit));
                }
                pos = nul + 1;
            }
            width = 1 << ((meta >> 3) & 0b11);
        }
        StructPackReader r = new StructPackReader(frame, pos, off + len, width);
        T value = body.apply(r);
        r.expectEnd();
        return value;
    }

    /** {@link #decode(byte[], int, int, SpType, Function)} over the whole array. */
    public static <T> T decode(byte[] frame, SpType type, Function<StructPackReader, T> body) {
        return decode(frame, 0, frame.length, type, body);
    }
}
