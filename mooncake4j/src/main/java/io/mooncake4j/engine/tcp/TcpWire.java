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
 * 17     7    padding zero when sent, ignored when received
 *
 * Status frame (target → initiator, v2 only)
 * offset size field
 * 0      4    code    u32 LE: 0 OK, 1 ADDR_REJECTED
 * 4      4    magic   u32 LE 0x4D435456 ("MCTV")
 * </pre>
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

    private TcpWire() {}

    /** Writes a header at the buffer's position (absolute puts; position unchanged). */
    public static void putHeader(ByteBuffer b, long size, long addr, int opcode) {
        b.order(ByteOrder.LITTLE_ENDIAN);
        int p = b.position();
        b.putLong(p, size);
        b.putLong(p + 8, addr);
        b.put(p + 16, (byte) opcode);
        for (int i = 17; i < HEADER_BYTES; i++) {
            b.put(p + i, (byte) 0);
        }
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
