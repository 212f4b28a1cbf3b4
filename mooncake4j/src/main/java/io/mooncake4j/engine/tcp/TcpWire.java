package io.mooncake4j.engine.tcp;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Mooncake's TCP data-plane frames ({@code TE/src/transport/tcp_transport/}): the 24-byte
 * {@code SessionHeader} and the 8-byte v2 status frame. All integers little-endian.
 *
 * <pre>
 * SessionHeader (initiator → target)
 * offset size field
 * 0      8    size    u64 LE, payload bytes
 * 8      8    addr    u64 LE, absolute address in the target process
 * 16     1    opcode  bits 0-6: 0 READ, 1 WRITE; bit 7 (0x80): v2 framing
 * 17     7    padding ignored by Mooncake's servers (its C++ client does not even zero it); mooncake4j
 *              sends its engine tag there: {@link #TAG_MARKER}, then the tag's 6 bytes LE
 *
 * Status frame (target → initiator, v2 only)
 * offset size field
 * 0      4    code    u32 LE: 0 OK, 1 ADDR_REJECTED, 2 SELF (mooncake4j: the request came from the target
 *                     engine itself, see below)
 * 4      4    magic   u32 LE 0x4D435456 ("MCTV")
 * </pre>
 *
 * <p><b>Engine tag.</b> Each mooncake4j TCP engine draws a random non-zero 48-bit tag and sends it in the
 * padding of its request headers; its data server refuses a request that carries its own tag (answered
 * {@link #STATUS_SELF} in v2, closed in v1): whatever name, port, forwarder or NAT led there, that request
 * comes from this engine and would write into (or read from) its own memory over the network. Mooncake's
 * servers ignore the padding, and a C++ client's unzeroed padding matches a tag with odds of 2^-56.
 */
public final class TcpWire {

    public static final int HEADER_BYTES = 24;
    public static final int STATUS_BYTES = 8;
    public static final int OP_READ = 0;
    public static final int OP_WRITE = 1;
    public static final int V2_FLAG = 0x80;
    public static final int STATUS_MAGIC = 0x4D435456;
    public static final long STATUS_OK = (long) STATUS_MAGIC << 32;
    public static final long STATUS_ADDR_REJECTED = STATUS_OK | 1L;
    /** mooncake4j: the request carries the target engine's own tag (only ever sent to mooncake4j initiators). */
    public static final long STATUS_SELF = STATUS_OK | 2L;
    /** The first padding byte of a header that carries an engine tag. */
    public static final int TAG_MARKER = 0x6D;
    /** The bits of an engine tag. */
    public static final long TAG_MASK = (1L << 48) - 1;

    private TcpWire() {}

    /** Writes a header at the buffer's position (absolute puts; position unchanged), zero padding. */
    public static void putHeader(ByteBuffer b, long size, long addr, int opcode) {
        putHeader(b, size, addr, opcode, 0);
    }

    /** As above, with engine tag {@code tag} in the padding (0: none, zero padding). */
    public static void putHeader(ByteBuffer b, long size, long addr, int opcode, long tag) {
        b.order(ByteOrder.LITTLE_ENDIAN);
        int p = b.position();
        b.putLong(p, size);
        b.putLong(p + 8, addr);
        b.put(p + 16, (byte) opcode);
        b.put(p + 17, (byte) (tag == 0 ? 0 : TAG_MARKER));
        for (int i = 0; i < 6; i++) {
            b.put(p + 18 + i, (byte) (tag >>> (8 * i)));
        }
    }

    /** The engine tag in the padding of the header at {@code p}, or 0 when it carries none. */
    public static long tag(ByteBuffer b, int p) {
        if ((b.get(p + 17) & 0xff) != TAG_MARKER) {
            return 0;
        }
        long t = 0;
        for (int i = 0; i < 6; i++) {
            t |= (b.get(p + 18 + i) & 0xffL) << (8 * i);
        }
        return t;
    }

    /** A random non-zero engine tag. */
    public static long newTag() {
        java.security.SecureRandom r = new java.security.SecureRandom();
        long t;
        do {
            t = r.nextLong() & TAG_MASK;
        } while (t == 0);
        return t;
    }

    /** Encodes a header into a new 24-byte array (tests, tools). */
    public static byte[] header(long size, long addr, int opcode) {
        ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES);
        putHeader(b, size, addr, opcode);
        return b.array();
    }

    /** Encodes a status frame into a new 8-byte array (tests, tools). */
    public static byte[] status(long frame) {
        return ByteBuffer.allocate(STATUS_BYTES).order(ByteOrder.LITTLE_ENDIAN).putLong(0, frame).array();
    }

    /** Whether a status frame carries the magic. */
    public static boolean validStatus(long frame) {
        return (int) (frame >>> 32) == STATUS_MAGIC;
    }

    /** Whether {@code [addr, addr+size)} is non-empty and does not wrap past 2^64. */
    public static boolean validRange(long addr, long size) {
        return size != 0 && Long.compareUnsigned(addr, -1L - size) <= 0;
    }
}
