package io.mooncake4j.store.connector;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The bytes vLLM hashes for one prefix-cache block: the value {@code (parent_hash, tuple(token_ids),
 * extra_keys)} (and, for {@code NONE_HASH}, the seed string) serialized as Python's {@code pickle}
 * protocol 5 writes it ({@code sha256}) or as {@code cbor2.dumps(..., canonical=True)} writes it
 * ({@code sha256_cbor}).
 *
 * <p>Only the value types that occur in block hashes are written: {@code bytes}, {@code str}, ints in
 * the signed 32-bit range (token ids), {@code None}, and tuples of these. An extra key that is a
 * Java {@code String} is a Python {@code str}, a {@code byte[]} is {@code bytes}, an {@code Integer}
 * is an {@code int}; anything else is refused.
 *
 * <p>Pickle details reproduced (CPython's {@code _pickle} at protocol 5): the {@code PROTO 5} header,
 * one {@code FRAME} holding the rest (frames of 64 KiB and more are split by CPython, so a block whose
 * pickle reaches that size is refused here rather than hashed wrongly), {@code SHORT_BINBYTES} /
 * {@code BINBYTES}, {@code SHORT_BINUNICODE} / {@code BINUNICODE}, {@code BININT1/2/BININT},
 * {@code NONE}, {@code EMPTY_TUPLE} / {@code TUPLE1..3} / {@code MARK..TUPLE}, and a {@code MEMOIZE}
 * after every bytes, str and non-empty tuple. Equal extra-key objects that are the same Python
 * object would be written as memo references by pickle; vLLM's extra keys (LoRA name, multimodal
 * hashes, cache salt, prompt-embeds digest) are distinct objects, and so are ours.
 *
 * @see <a href="https://github.com/python/cpython/blob/3.12/Modules/_pickle.c">_pickle.c</a>
 * @see <a href="https://www.rfc-editor.org/rfc/rfc8949#section-4.2.1">RFC 8949 §4.2.1</a> (canonical CBOR)
 */
final class HashInput {

    /** CPython's {@code _FRAME_SIZE_TARGET}: a frame reaching it is committed and a new one begun. */
    static final int FRAME_SIZE_TARGET = 64 * 1024;

    private HashInput() {}

    // ------------------------------------------------------------------ pickle protocol 5

    /** {@code pickle.dumps(s, protocol=5)} of a {@code str}. */
    static byte[] pickleString(String s) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        pickleValue(body, s);
        return framed(body);
    }

    /** {@code pickle.dumps((parent, tuple(tokens[from:to]), extra), protocol=5)}; {@code extra} may be null. */
    static byte[] pickleBlock(byte[] parent, int[] tokens, int from, int to, List<Object> extra) {
        ByteArrayOutputStream body = new ByteArrayOutputStream(16 + 5 * (to - from) + parent.length);
        pickleValue(body, parent);
        pickleInts(body, tokens, from, to);
        if (extra == null) {
            body.write('N');
        } else {
            pickleTuple(body, extra);
        }
        body.write(0x87); // TUPLE3
        body.write(0x94); // MEMOIZE
        return framed(body);
    }

    private static byte[] framed(ByteArrayOutputStream body) {
        body.write('.'); // STOP, inside the frame
        int n = body.size();
        if (n >= FRAME_SIZE_TARGET) {
            throw new IllegalArgumentException("a block's pickle of " + n
                    + " bytes would span several frames; not reproduced (use fewer tokens per block)");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(n + 11);
        out.write(0x80); // PROTO
        out.write(5);
        out.write(0x95); // FRAME, 8-byte little-endian length
        for (int i = 0; i < 8; i++) {
            out.write(i < 4 ? (n >>> (8 * i)) & 0xff : 0);
        }
        out.write(body.toByteArray(), 0, n);
        return out.toByteArray();
    }

    private static void pickleInts(ByteArrayOutputStream out, int[] tokens, int from, int to) {
        int n = to - from;
        if (n == 0) {
            out.write(')'); // EMPTY_TUPLE, not memoized
            return;
        }
        if (n > 3) {
            out.write('('); // MARK
        }
        for (int i = from; i < to; i++) {
            pickleInt(out, tokens[i]);
        }
        out.write(n > 3 ? 't' : 0x84 + n); // TUPLE or TUPLE1..3
        out.write(0x94);
    }

    private static void pickleTuple(ByteArrayOutputStream out, List<Object> items) {
        int n = items.size();
        if (n == 0) {
            out.write(')');
            return;
        }
        if (n > 3) {
            out.write('(');
        }
        for (Object o : items) {
            pickleValue(out, o);
        }
        out.write(n > 3 ? 't' : 0x84 + n);
        out.write(0x94);
    }

    private static void pickleInt(ByteArrayOutputStream out, int v) {
        if (v >= 0 && v <= 0xff) {
            out.write('K'); // BININT1
            out.write(v);
        } else if (v >= 0 && v <= 0xffff) {
            out.write('M'); // BININT2
            out.write(v & 0xff);
            out.write(v >>> 8);
        } else {
            out.write('J'); // BININT, signed 4-byte little-endian
            le32(out, v);
        }
    }

    private static void pickleValue(ByteArrayOutputStream out, Object o) {
        switch (o) {
            case null -> out.write('N');
            case Integer i -> pickleInt(out, i);
            case byte[] b -> {
                if (b.length < 256) {
                    out.write('C'); // SHORT_BINBYTES
                    out.write(b.length);
                } else {
                    out.write('B'); // BINBYTES
                    le32(out, b.length);
                }
                out.write(b, 0, b.length);
                out.write(0x94);
            }
            case String s -> {
                byte[] u = utf8(s);
                if (u.length < 256) {
                    out.write(0x8c); // SHORT_BINUNICODE
                    out.write(u.length);
                } else {
                    out.write('X'); // BINUNICODE
                    le32(out, u.length);
                }
                out.write(u, 0, u.length);
                out.write(0x94);
            }
            default -> throw unsupported(o);
        }
    }

    private static void le32(ByteArrayOutputStream out, int v) {
        for (int i = 0; i < 4; i++) {
            out.write((v >>> (8 * i)) & 0xff);
        }
    }

    // ------------------------------------------------------------------ canonical CBOR

    /** {@code cbor2.dumps(s, canonical=True)} of a {@code str}. */
    static byte[] cborString(String s) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        cborValue(out, s);
        return out.toByteArray();
    }

    /** {@code cbor2.dumps((parent, tuple(tokens[from:to]), extra), canonical=True)}; {@code extra} may be null. */
    static byte[] cborBlock(byte[] parent, int[] tokens, int from, int to, List<Object> extra) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(16 + 5 * (to - from) + parent.length);
        cborHead(out, 4, 3);
        cborValue(out, parent);
        cborHead(out, 4, to - from);
        for (int i = from; i < to; i++) {
            cborValue(out, tokens[i]);
        }
        if (extra == null) {
            out.write(0xf6);
        } else {
            cborHead(out, 4, extra.size());
            for (Object o : extra) {
                cborValue(out, o);
            }
        }
        return out.toByteArray();
    }

    private static void cborValue(ByteArrayOutputStream out, Object o) {
        switch (o) {
            case null -> out.write(0xf6);
            case Integer i -> {
                if (i >= 0) {
                    cborHead(out, 0, i);
                } else {
                    cborHead(out, 1, -1L - i);
                }
            }
            case byte[] b -> {
                cborHead(out, 2, b.length);
                out.write(b, 0, b.length);
            }
            case String s -> {
                byte[] u = utf8(s);
                cborHead(out, 3, u.length);
                out.write(u, 0, u.length);
            }
            default -> throw unsupported(o);
        }
    }

    /** The shortest head for major type {@code major} and argument {@code v} (canonical). */
    private static void cborHead(ByteArrayOutputStream out, int major, long v) {
        int m = major << 5;
        if (v < 24) {
            out.write(m | (int) v);
        } else if (v <= 0xff) {
            out.write(m | 24);
            out.write((int) v);
        } else if (v <= 0xffff) {
            out.write(m | 25);
            out.write((int) (v >>> 8));
            out.write((int) v & 0xff);
        } else if (v <= 0xffffffffL) {
            out.write(m | 26);
            for (int s = 24; s >= 0; s -= 8) {
                out.write((int) (v >>> s) & 0xff);
            }
        } else {
            out.write(m | 27);
            for (int s = 56; s >= 0; s -= 8) {
                out.write((int) (v >>> s) & 0xff);
            }
        }
    }

    private static byte[] utf8(String s) {
        // Python's str is code points: a lone surrogate cannot be encoded (pickle would refuse it too)
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isSurrogate(c)) {
                if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i++;
                    continue;
                }
                throw new IllegalArgumentException("extra key has a lone surrogate at index " + i);
            }
        }
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static IllegalArgumentException unsupported(Object o) {
        return new IllegalArgumentException("an extra key must be a String (str), byte[] (bytes) or Integer (int), got "
                + o.getClass().getName());
    }
}
