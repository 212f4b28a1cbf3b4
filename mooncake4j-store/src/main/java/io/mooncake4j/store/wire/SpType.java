package io.mooncake4j.store.wire;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;

/**
 * A struct_pack type, as far as its type literal: the byte string of type ids whose MD5 is the
 * hash at the head of every struct_pack message, and which a build without {@code NDEBUG}
 * (Mooncake's Release flags) also writes after the meta byte. Field names are not part of it,
 * enums appear as their underlying integer, a trivially copyable struct ({@code std::pair} of
 * integers, i.e. Mooncake's {@code UUID}) gets its pack alignment and alignment as size literals
 * before its end mark, and a function's parameter list is a struct of the parameters (one
 * parameter is packed as itself).
 */
public sealed interface SpType {

    /** Appends this type's literal. */
    void literal(ByteArrayOutputStream out);

    /** {@return the literal of this type as the root of a message} */
    default byte[] literal() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        literal(out);
        return out.toByteArray();
    }

    /** {@return the 32-bit type hash (low bit clear) of a message whose root is this type} */
    default int hash() {
        return hashOf(literal());
    }

    /** {@return MD5 of {@code literal}, first four bytes read big-endian, low bit cleared} */
    static int hashOf(byte[] literal) {
        byte[] d = md5(literal);
        int h = ((d[0] & 0xff) << 24) | ((d[1] & 0xff) << 16) | ((d[2] & 0xff) << 8) | (d[3] & 0xff);
        return h & 0xFFFFFFFE;
    }

    /** {@return coro_rpc's function id of a qualified name: MD5, first four bytes big-endian} */
    static int functionId(String qualifiedName) {
        byte[] d = md5(qualifiedName.getBytes(StandardCharsets.US_ASCII));
        return ((d[0] & 0xff) << 24) | ((d[1] & 0xff) << 16) | ((d[2] & 0xff) << 8) | (d[3] & 0xff);
    }

    private static byte[] md5(byte[] in) {
        try {
            return MessageDigest.getInstance("MD5").digest(in);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("MD5 missing from the JDK", e);
        }
    }

    /** A fixed-width integer, enum or bool, by struct_pack type id. */
    record Prim(int id) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(id);
        }
    }

    /** {@code std::string}: string id then its element type, char. */
    record Str() implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0x80);
            out.write(0x0c);
        }
    }

    /** {@code std::vector<E>}. */
    record Vec(SpType element) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0x84);
            element.literal(out);
        }
    }

    /** {@code std::optional<E>}. */
    record Opt(SpType element) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0x85);
            element.literal(out);
        }
    }

    /** {@code std::variant<A...>}. */
    record Variant(List<SpType> alternatives) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0x86);
            alternatives.forEach(a -> a.literal(out));
            out.write(0xff);
        }
    }

    /** {@code tl::expected<V, E>}; {@code void} is {@link #MONOSTATE}. */
    record Expected(SpType value, SpType error) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0x87);
            value.literal(out);
            error.literal(out);
        }
    }

    /** {@code std::monostate}, also {@code void}. */
    record Monostate() implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0xfa);
        }
    }

    /**
     * A struct (or a parameter list); {@code trivialAlign > 0} marks a trivially copyable one,
     * whose pack alignment and alignment (both {@code trivialAlign}) follow its fields.
     */
    record Struct(List<SpType> fields, int trivialAlign) implements SpType {
        @Override
        public void literal(ByteArrayOutputStream out) {
            out.write(0xfd);
            fields.forEach(f -> f.literal(out));
            if (trivialAlign > 0) {
                // struct_pack's size literal: below 127 it is one byte, value + 129
                out.write(trivialAlign + 129);
                out.write(trivialAlign + 129);
            }
            out.write(0xff);
        }
    }

    SpType INT32 = new Prim(0x01);
    SpType UINT32 = new Prim(0x02);
    SpType INT64 = new Prim(0x03);
    SpType UINT64 = new Prim(0x04);
    SpType INT8 = new Prim(0x05);
    SpType UINT8 = new Prim(0x06);
    SpType UINT16 = new Prim(0x08);
    SpType BOOL = new Prim(0x0b);
    SpType STRING = new Str();
    SpType MONOSTATE = new Monostate();

    /** {@return a non-trivial struct of {@code fields}} */
    static SpType struct(SpType... fields) {
        return new Struct(List.of(fields), 0);
    }

    /** {@return the literal bytes as lowercase hex with spaces, for messages} */
    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < b.length; i++) {
            if (i > 0) {
                sb.append(' ');
            }
            sb.append(Character.forDigit((b[i] >> 4) & 0xf, 16)).append(Character.forDigit(b[i] & 0xf, 16));
        }
        return sb.toString();
    }
}
