package io.mooncake4j.internal.zmtp;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * ZMTP 3.x wire constants and encoders (RFC 23/ZMTP 3.0, RFC 37/ZMTP 3.1): the greeting, frames and the
 * NULL mechanism's commands. Stateless and thread-safe.
 */
public final class Zmtp {

    /** Length of the greeting: signature (10), version (2), mechanism (20), as-server (1), filler (31). */
    public static final int GREETING_BYTES = 64;
    /** Frame flag: more frames of this message follow. */
    public static final int FLAG_MORE = 0x01;
    /** Frame flag: an 8-byte size follows instead of a 1-byte one. */
    public static final int FLAG_LONG = 0x02;
    /** Frame flag: the frame is a command, not a message frame. */
    public static final int FLAG_COMMAND = 0x04;
    /** The major and minor version this side announces. */
    public static final int MAJOR = 3;
    public static final int MINOR = 1;
    /** The only mechanism supported. */
    public static final String MECHANISM_NULL = "NULL";
    /** The largest {@code Identity} a peer may announce (ZMTP: 255 octets). */
    public static final int MAX_IDENTITY_BYTES = 255;
    /** The largest PING context (RFC 37: up to 16 octets). */
    public static final int MAX_PING_CONTEXT_BYTES = 16;

    public static final String READY = "READY";
    public static final String ERROR = "ERROR";
    public static final String PING = "PING";
    public static final String PONG = "PONG";
    public static final String PROP_SOCKET_TYPE = "Socket-Type";
    public static final String PROP_IDENTITY = "Identity";

    private Zmtp() {
    }

    /** {@return our greeting: version 3.1, mechanism NULL, as-server 0} */
    public static byte[] greeting() {
        byte[] g = new byte[GREETING_BYTES];
        g[0] = (byte) 0xFF;
        g[9] = 0x7F;
        g[10] = MAJOR;
        g[11] = MINOR;
        byte[] mech = MECHANISM_NULL.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(mech, 0, g, 12, mech.length);
        return g;
    }

    /**
     * Whether a socket of type {@code ours} may talk to one of type {@code peers} (the RFC's table,
     * for the types we use).
     */
    public static boolean compatible(String ours, String peers) {
        Set<String> ok = switch (ours) {
            case "ROUTER" -> Set.of("DEALER", "REQ", "ROUTER");
            case "DEALER" -> Set.of("REP", "DEALER", "ROUTER");
            default -> Set.of();
        };
        return ok.contains(peers);
    }

    /**
     * The body of a READY command announcing {@code socketType}, and {@code identity} unless it is null.
     *
     * @throws IllegalArgumentException when the identity is longer than 255 bytes
     */
    public static byte[] readyBody(String socketType, byte[] identity) {
        if (identity != null && identity.length > MAX_IDENTITY_BYTES) {
            throw new IllegalArgumentException("a ZMTP identity has at most 255 bytes, got " + identity.length);
        }
        byte[] type = socketType.getBytes(StandardCharsets.US_ASCII);
        int len = 1 + READY.length() + property(PROP_SOCKET_TYPE, type.length)
                + (identity == null ? 0 : property(PROP_IDENTITY, identity.length));
        ByteBuffer b = ByteBuffer.allocate(len);
        name(b, READY);
        putProperty(b, PROP_SOCKET_TYPE, type);
        if (identity != null) {
            putProperty(b, PROP_IDENTITY, identity);
        }
        return b.array();
    }

    /** The body of an ERROR command with {@code reason} (cut to 255 bytes). */
    public static byte[] errorBody(String reason) {
        byte[] r = reason.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(255, r.length);
        ByteBuffer b = ByteBuffer.allocate(1 + ERROR.length() + 1 + n);
        name(b, ERROR);
        b.put((byte) n).put(r, 0, n);
        return b.array();
    }

    /** The body of a PING command with a TTL in tenths of a second and a context of at most 16 bytes. */
    public static byte[] pingBody(int ttlDeciseconds, byte[] context) {
        if (context.length > MAX_PING_CONTEXT_BYTES || ttlDeciseconds < 0 || ttlDeciseconds > 0xFFFF) {
            throw new IllegalArgumentException("PING: TTL 0..65535 and a context of at most 16 bytes");
        }
        ByteBuffer b = ByteBuffer.allocate(1 + PING.length() + 2 + context.length);
        name(b, PING);
        b.putShort((short) ttlDeciseconds).put(context);
        return b.array();
    }

    /** The body of the PONG that answers a PING with {@code context}. */
    public static byte[] pongBody(byte[] context) {
        ByteBuffer b = ByteBuffer.allocate(1 + PONG.length() + context.length);
        name(b, PONG);
        b.put(context);
        return b.array();
    }

    private static int property(String name, int valueLength) {
        return 1 + name.length() + 4 + valueLength;
    }

    private static void name(ByteBuffer b, String name) {
        b.put((byte) name.length()).put(name.getBytes(StandardCharsets.US_ASCII));
    }

    private static void putProperty(ByteBuffer b, String name, byte[] value) {
        name(b, name);
        b.putInt(value.length).put(value);
    }

    /** {@return the header length of a frame of {@code size} bytes: 2 (short) or 9 (long)} */
    public static int headerBytes(long size) {
        return size <= 255 ? 2 : 9;
    }

    /** Writes a frame header: short form up to 255 bytes, else the long form with an 8-byte size. */
    public static void putHeader(ByteBuffer out, int flags, long size) {
        if (size < 0) {
            throw new IllegalArgumentException("negative frame size " + size);
        }
        if (size <= 255) {
            out.put((byte) (flags & ~FLAG_LONG)).put((byte) size);
        } else {
            out.put((byte) (flags | FLAG_LONG)).putLong(size);
        }
    }

    /** {@return a command frame (header and body) ready to write} */
    public static ByteBuffer commandFrame(byte[] body) {
        ByteBuffer b = ByteBuffer.allocate(headerBytes(body.length) + body.length);
        putHeader(b, FLAG_COMMAND, body.length);
        b.put(body);
        return b.flip();
    }

    /** {@return the frames of one message (MORE on all but the last), header and bodies, ready to write} */
    public static ByteBuffer messageFrames(List<byte[]> frames) {
        if (frames.isEmpty()) {
            throw new IllegalArgumentException("a ZMTP message has at least one frame");
        }
        long len = 0;
        for (byte[] f : frames) {
            len += headerBytes(f.length) + f.length;
        }
        if (len > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "message of %d bytes is too large", len));
        }
        ByteBuffer b = ByteBuffer.allocate((int) len);
        for (int i = 0; i < frames.size(); i++) {
            byte[] f = frames.get(i);
            putHeader(b, i < frames.size() - 1 ? FLAG_MORE : 0, f.length);
            b.put(f);
        }
        return b.flip();
    }
}
