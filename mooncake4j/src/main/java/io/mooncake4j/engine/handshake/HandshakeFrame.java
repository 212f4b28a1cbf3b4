package io.mooncake4j.engine.handshake;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * One handshake frame (Mooncake {@code writeString}/{@code readString}, {@code TE/include/common.h}).
 *
 * <pre>
 * offset  size        field
 * 0       8           length, u64 LE: type byte + payload (legacy: payload only)
 * 8       1           type: 0 Connection, 1 Metadata, 2 Notify, 3 Probe (absent in legacy frames)
 * 9       length-1    JSON payload, UTF-8, jsoncpp FastWriter style (trailing LF)
 * </pre>
 *
 * <p>On receipt, a first byte of 0..3 is the type; any other first byte makes the whole buffer
 * a legacy (type-less) Connection frame. A first byte of 0x80..0xFF is what Mooncake reads as a
 * negative {@code char}: it is rejected as invalid here, as the C++ server drops it.
 *
 * @param type {@link #CONNECTION}, {@link #METADATA}, {@link #NOTIFY}, {@link #PROBE}, or
 *             {@link #LEGACY} for a frame without type byte (a Connection request)
 * @param json the payload
 */
public record HandshakeFrame(int type, String json) {

    public static final int CONNECTION = 0;
    public static final int METADATA = 1;
    public static final int NOTIFY = 2;
    public static final int PROBE = 3;
    /** Marks a frame without type byte; it is a Connection request on the wire. */
    public static final int LEGACY = -1;

    /** Header bytes before the payload (length only; the type byte counts in the length). */
    public static final int LENGTH_BYTES = 8;

    public HandshakeFrame {
        if (type < LEGACY || type > PROBE) {
            throw new IllegalArgumentException("bad handshake type " + type);
        }
        java.util.Objects.requireNonNull(json, "json");
    }

    /** The bytes of this frame on the wire. */
    public byte[] encode() {
        byte[] payload = json.getBytes(StandardCharsets.UTF_8);
        boolean typed = type != LEGACY;
        ByteBuffer b = ByteBuffer.allocate(LENGTH_BYTES + (typed ? 1 : 0) + payload.length)
                .order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(payload.length + (typed ? 1L : 0L));
        if (typed) {
            b.put((byte) type);
        }
        b.put(payload);
        return b.array();
    }

    /** Whether this is a typeless (legacy) frame. */
    public boolean legacy() {
        return type == LEGACY;
    }

    /** Name of a type, for logs. */
    public static String typeName(int type) {
        return switch (type) {
            case CONNECTION -> "Connection";
            case METADATA -> "Metadata";
            case NOTIFY -> "Notify";
            case PROBE -> "Probe";
            case LEGACY -> "Connection(legacy)";
            default -> "type " + type;
        };
    }

    /** A frame that could not be read: short, too long, zero length or with a bad type byte. */
    public static final class FrameException extends IOException {
        private static final long serialVersionUID = 1L;

        public FrameException(String message) {
            super(message);
        }
    }

    /**
     * Reads exactly one frame.
     *
     * @param maxLength {@code MC_HANDSHAKE_MAX_LENGTH}: the largest accepted {@code length}
     * @throws FrameException on a malformed frame (the caller closes the connection)
     * @throws IOException    on I/O errors and timeouts
     */
    public static HandshakeFrame read(InputStream in, int maxLength) throws IOException {
        byte[] len = new byte[LENGTH_BYTES];
        int n = readFully(in, len);
        if (n < LENGTH_BYTES) {
            throw new FrameException(n == 0 ? "connection closed before a frame"
                    : String.format(Locale.ROOT, "truncated length prefix (%d of 8 bytes)", n));
        }
        long length = ByteBuffer.wrap(len).order(ByteOrder.LITTLE_ENDIAN).getLong();
        if (length == 0 || Long.compareUnsigned(length, maxLength) > 0) {
            throw new FrameException(String.format(Locale.ROOT,
                    "frame length %s outside 1..%d (MC_HANDSHAKE_MAX_LENGTH)", Long.toUnsignedString(length),
                    maxLength));
        }
        byte[] body = new byte[(int) length];
        int got = readFully(in, body);
        if (got < body.length) {
            throw new FrameException(String.format(Locale.ROOT, "truncated frame: %d of %d bytes", got, length));
        }
        int first = body[0];
        if (first >= 0 && first <= PROBE) {
            return new HandshakeFrame(first, new String(body, 1, body.length - 1, StandardCharsets.UTF_8));
        }
        if (first < 0) {
            throw new FrameException(String.format(Locale.ROOT, "invalid type byte 0x%02x", first & 0xff));
        }
        return new HandshakeFrame(LEGACY, new String(body, StandardCharsets.UTF_8));
    }

    private static int readFully(InputStream in, byte[] buf) throws IOException {
        int off = 0;
        while (off < buf.length) {
            int r;
            try {
                r = in.read(buf, off, buf.length - off);
            } catch (EOFException e) {
                r = -1;
            }
            if (r < 0) {
                break;
            }
            off += r;
        }
        return off;
    }
}
