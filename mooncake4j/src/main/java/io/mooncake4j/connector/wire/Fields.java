package io.mooncake4j.connector.wire;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Typed field reads shared by the codecs, with msgspec-style error messages
 * ({@code Expected `int`, got `str` - at `$.remote_port`}) so that a Python peer logging our
 * {@code ERROR} reply reads the same text it would get from vLLM.
 */
final class Fields {

    private Fields() {
    }

    static String msgspecName(MsgpackType t) {
        return switch (t) {
            case NIL -> "null";
            case BOOLEAN -> "bool";
            case INTEGER -> "int";
            case FLOAT -> "float";
            case STRING -> "str";
            case BINARY -> "bytes";
            case ARRAY -> "array";
            case MAP -> "object";
            case EXTENSION -> "ext";
        };
    }

    static ProtocolException typeError(String expected, MsgpackType got, String path) {
        return new ProtocolException(String.format(Locale.ROOT, "Expected `%s`, got `%s` - at `%s`",
                expected, msgspecName(got), path));
    }

    static ProtocolException missing(String field) {
        return new ProtocolException("Object missing required field `" + field + "`");
    }

    static void expect(MsgpackReader r, MsgpackType t, String expected, String path) {
        MsgpackType got = r.peekType();
        if (got != t) {
            throw typeError(expected, got, path);
        }
    }

    static String str(MsgpackReader r, String path) {
        expect(r, MsgpackType.STRING, "str", path);
        return r.readString();
    }

    static long int64(MsgpackReader r, String path) {
        expect(r, MsgpackType.INTEGER, "int", path);
        return r.readLong();
    }

    static int int32(MsgpackReader r, String path) {
        expect(r, MsgpackType.INTEGER, "int", path);
        long v = r.readLong();
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw new ProtocolException(String.format(Locale.ROOT,
                    "Expected `int` in [%d, %d], got %d - at `%s`", Integer.MIN_VALUE, Integer.MAX_VALUE, v, path));
        }
        return (int) v;
    }

    /** A non-negative integer up to 2^64-1 as its 64-bit pattern (addresses). */
    static long uint64(MsgpackReader r, String path) {
        expect(r, MsgpackType.INTEGER, "int", path);
        int at = r.position();
        try {
            return r.readUnsignedLong();
        } catch (ProtocolException e) {
            throw new ProtocolException("Expected `int` >= 0 - at `" + path + "` (byte " + at + ")", e);
        }
    }

    static int arrayHeader(MsgpackReader r, String path) {
        expect(r, MsgpackType.ARRAY, "array", path);
        return r.readArrayHeader();
    }

    static long[] int64Array(MsgpackReader r, String path) {
        int n = arrayHeader(r, path);
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = int64(r, path + "[" + i + "]");
        }
        return out;
    }

    static long[] uint64Array(MsgpackReader r, String path) {
        int n = arrayHeader(r, path);
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = uint64(r, path + "[" + i + "]");
        }
        return out;
    }

    static int[] int32Array(MsgpackReader r, String path) {
        int n = arrayHeader(r, path);
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = int32(r, path + "[" + i + "]");
        }
        return out;
    }

    static List<String> strList(MsgpackReader r, String path) {
        int n = arrayHeader(r, path);
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(str(r, path + "[" + i + "]"));
        }
        return List.copyOf(out);
    }

    /** Reads the map key of a struct: msgspec requires string keys. */
    static String key(MsgpackReader r) {
        expect(r, MsgpackType.STRING, "str", "$[...]");
        return r.readString();
    }

    static void strArray(MsgpackWriter w, List<String> values) {
        w.writeArrayHeader(values.size());
        for (String s : values) {
            w.writeString(s);
        }
    }
}
