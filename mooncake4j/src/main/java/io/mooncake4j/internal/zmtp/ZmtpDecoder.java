package io.mooncake4j.internal.zmtp;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The receiving half of a ZMTP 3.x connection with the NULL mechanism: reads the peer's greeting, its
 * READY (or ERROR) command, then message frames and commands, from input fed in pieces split anywhere
 * (one byte at a time works). Each rule the peer breaks ends the decoder with a
 * {@link ZmtpException} naming it (bad signature, major version below 3, a mechanism other than NULL,
 * an incompatible {@code Socket-Type}, a malformed command, a frame above the limits); after that
 * every {@link #feed} throws the same exception. One thread drives it.
 *
 * <p>Nothing is allocated on a peer's word alone: a frame's declared size is checked on its header,
 * and its buffer grows with the bytes that arrive ({@link #INITIAL_BODY_BYTES} first, then doubling).
 */
public final class ZmtpDecoder {

    /** What the decoder reports, on the thread that feeds it. */
    public interface Handler {
        /**
         * The peer's READY was read and its socket type is compatible with ours.
         *
         * @param socketType the peer's {@code Socket-Type}
         * @param identity   its {@code Identity} (empty when it sent none)
         * @throws ZmtpException to refuse the peer (say, its identity is in use)
         */
        void onReady(String socketType, byte[] identity) throws ZmtpException;

        /**
         * A complete message (one or more frames); the list is the handler's.
         *
         * @return true to go on decoding, false to make {@link #feed} return right after this message
         *         (the rest of its input left unread in the buffer)
         */
        boolean onMessage(List<byte[]> frames) throws ZmtpException;

        /** A PING with {@code context} (at most 16 bytes): the owner answers PONG. */
        void onPing(byte[] context);
    }

    /** A frame buffer starts this large (or at the frame's size when smaller) and doubles as bytes arrive. */
    static final int INITIAL_BODY_BYTES = 64 * 1024;

    private enum State { GREETING, FLAGS, SIZE, BODY, FAILED }

    private final String ourSocketType;
    private final ZmtpLimits limits;
    private final Handler handler;
    private State state = State.GREETING;
    private final byte[] greeting = new byte[Zmtp.GREETING_BYTES];
    private int greetingFill;
    private int peerMinor = -1;
    private boolean peerReady;
    private int flags;
    private final byte[] sizeBytes = new byte[8];
    private int sizeNeed;
    private int sizeFill;
    private long frameSize;
    private byte[] body;
    private int bodyFill;
    private List<byte[]> message = new ArrayList<>(2);
    private long messageBytes;
    private ZmtpException failure;
    private boolean stop;

    /**
     * @param ourSocketType our socket type ({@code ROUTER}, {@code DEALER}); the peer's must be compatible
     * @param limits        the bounds of what the peer may send
     * @param handler       hears what arrives
     */
    public ZmtpDecoder(String ourSocketType, ZmtpLimits limits, Handler handler) {
        this.ourSocketType = Objects.requireNonNull(ourSocketType, "ourSocketType");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.handler = Objects.requireNonNull(handler, "handler");
    }

    /** Whether the peer's READY was read and accepted. */
    public boolean peerReady() {
        return peerReady;
    }

    /** The peer's minor version (from its greeting), -1 before it was read. */
    public int peerMinor() {
        return peerMinor;
    }

    /** Whether the peer is inside a message or a frame (bytes of it read, not all of it). */
    public boolean midMessage() {
        return state == State.SIZE || state == State.BODY || !message.isEmpty();
    }

    /**
     * Consumes {@code in}, reporting to the handler as messages complete: all of it, or up to the end of
     * a message whose handler returned false.
     *
     * @throws ZmtpException when the peer broke the protocol or a limit (then and ever after)
     */
    public void feed(ByteBuffer in) throws ZmtpException {
        if (failure != null) {
            throw failure;
        }
        stop = false;
        try {
            while (in.hasRemaining() && !stop) {
                switch (state) {
                    case GREETING -> greeting(in);
                    case FLAGS -> flags(in.get() & 0xFF);
                    case SIZE -> size(in);
                    case BODY -> body(in);
                    case FAILED -> throw failure;
                }
            }
        } catch (ZmtpException e) {
            failure = e;
            state = State.FAILED;
            body = null;
            message = List.of();
            throw e;
        }
    }

    private static ZmtpException error(String format, Object... args) {
        return new ZmtpException(String.format(Locale.ROOT, format, args));
    }

    private void greeting(ByteBuffer in) throws ZmtpException {
        while (in.hasRemaining() && greetingFill < Zmtp.GREETING_BYTES) {
            int i = greetingFill++;
            int b = in.get() & 0xFF;
            greeting[i] = (byte) b;
            if (i == 0 && b != 0xFF) {
                throw error("not a ZMTP 3 peer: its greeting starts with 0x%02x, not the signature's 0xFF "
                        + "(ZMTP 1.0 or not ZMTP at all)", b);
            } else if (i == 9 && b != 0x7F) {
                throw error("not a ZMTP 3 peer: signature byte 10 is 0x%02x, not 0x7F", b);
            } else if (i == 10 && b < Zmtp.MAJOR) {
                throw error("unsupported ZMTP version: the peer's greeting announces major version %d (%s); "
                        + "this side speaks ZMTP 3.0 and later only", b, b == 1 ? "ZMTP 2.0" : "before ZMTP 3.0");
            } else if (i == 11) {
                peerMinor = b;
            } else if (i == 31) {
                checkMechanism();
            }
        }
        if (greetingFill == Zmtp.GREETING_BYTES) {
            state = State.FLAGS; // as-server and the filler mean nothing with NULL
        }
    }

    private void checkMechanism() throws ZmtpException {
        int end = 12;
        while (end < 32 && greeting[end] != 0) {
            end++;
        }
        boolean zeros = true;
        for (int j = end; j < 32; j++) {
            zeros &= greeting[j] == 0;
        }
        String mech = new String(greeting, 12, end - 12, StandardCharsets.US_ASCII);
        if (!zeros || !Zmtp.MECHANISM_NULL.equals(mech)) {
            throw error("unsupported ZMTP security mechanism '%s': this side speaks NULL only", printable(mech));
        }
    }

    private void flags(int f) throws ZmtpException {
        if ((f & ~(Zmtp.FLAG_MORE | Zmtp.FLAG_LONG | Zmtp.FLAG_COMMAND)) != 0) {
            throw error("malformed frame header: reserved flag bits set (flags 0x%02x)", f);
        }
        boolean command = (f & Zmtp.FLAG_COMMAND) != 0;
        if (command && (f & Zmtp.FLAG_MORE) != 0) {
            throw error("malformed command frame: the MORE flag is set (flags 0x%02x)", f);
        }
        if (command && !message.isEmpty()) {
            throw error("malformed message: a command frame between the frames of a message");
        }
        if (!command && !peerReady) {
            throw error("a message frame before the peer's READY command");
        }
        flags = f;
        sizeNeed = (f & Zmtp.FLAG_LONG) != 0 ? 8 : 1;
        sizeFill = 0;
        state = State.SIZE;
    }

    private void size(ByteBuffer in) throws ZmtpException {
        while (in.hasRemaining() && sizeFill < sizeNeed) {
            sizeBytes[sizeFill++] = in.get();
        }
        if (sizeFill < sizeNeed) {
            return;
        }
        long size = 0;
        for (int i = 0; i < sizeNeed; i++) {
            size = size << 8 | (sizeBytes[i] & 0xFF);
        }
        if (size < 0) {
            throw error("malformed frame header: size 0x%016x has its top bit set", size);
        }
        if ((flags & Zmtp.FLAG_COMMAND) != 0) {
            if (size > limits.maxCommandBytes()) {
                throw error("command frame of %d bytes exceeds the limit of %d bytes", size, limits.maxCommandBytes());
            }
        } else {
            if (size > limits.maxFrameBytes()) {
                throw error("frame of %d bytes exceeds the limit of %d bytes", size, limits.maxFrameBytes());
            }
            if (size > limits.maxMessageBytes() - messageBytes) {
                throw error("message of more than %d bytes exceeds the limit of %d bytes", messageBytes + size,
                        limits.maxMessageBytes());
            }
            if (message.size() >= limits.maxFramesPerMessage()) {
                throw error("message of more than %d frames exceeds the limit", limits.maxFramesPerMessage());
            }
            if (size > Integer.MAX_VALUE - 64) {
                throw error("frame of %d bytes is too large for this side", size);
            }
        }
        frameSize = size;
        body = new byte[(int) Math.min(size, INITIAL_BODY_BYTES)];
        bodyFill = 0;
        state = State.BODY;
        if (size == 0) {
            frameDone();
        }
    }

    private void body(ByteBuffer in) throws ZmtpException {
        while (in.hasRemaining() && bodyFill < frameSize) {
            if (bodyFill == body.length) {
                body = java.util.Arrays.copyOf(body, (int) Math.min(frameSize, 2L * body.length));
            }
            int n = Math.min(in.remaining(), body.length - bodyFill);
            in.get(body, bodyFill, n);
            bodyFill += n;
        }
        if (bodyFill == frameSize) {
            frameDone();
        }
    }

    private void frameDone() throws ZmtpException {
        byte[] b = body;
        body = null;
        state = State.FLAGS;
        if ((flags & Zmtp.FLAG_COMMAND) != 0) {
            command(b);
            return;
        }
        message.add(b);
        messageBytes += b.length;
        if ((flags & Zmtp.FLAG_MORE) == 0) {
            List<byte[]> done = message;
            message = new ArrayList<>(2);
            messageBytes = 0;
            stop = !handler.onMessage(done);
        }
    }

    private void command(byte[] b) throws ZmtpException {
        if (b.length < 1) {
            throw error("malformed command: an empty command frame");
        }
        int nameLen = b[0] & 0xFF;
        if (nameLen == 0 || 1 + nameLen > b.length) {
            throw error("malformed command: a name of %d bytes in a command of %d bytes", nameLen, b.length);
        }
        String name = new String(b, 1, nameLen, StandardCharsets.US_ASCII);
        int pos = 1 + nameLen;
        if (Zmtp.ERROR.equals(name)) {
            int n = pos < b.length ? b[pos] & 0xFF : 0;
            String reason = new String(b, Math.min(pos + 1, b.length), Math.min(n, Math.max(0, b.length - pos - 1)),
                    StandardCharsets.UTF_8);
            throw error("the peer sent ERROR: %s", printable(reason));
        }
        if (!peerReady) {
            if (!Zmtp.READY.equals(name)) {
                throw error("expected the peer's READY command, got command '%s'", printable(name));
            }
            ready(b, pos);
            return;
        }
        switch (name) {
            case Zmtp.READY -> throw error("malformed handshake: a second READY command");
            case Zmtp.PING -> {
                int ctx = b.length - pos - 2;
                if (ctx < 0 || ctx > Zmtp.MAX_PING_CONTEXT_BYTES) {
                    throw error("malformed PING command of %d bytes", b.length);
                }
                handler.onPing(java.util.Arrays.copyOfRange(b, pos + 2, b.length));
            }
            default -> {
                // PONG and commands of other socket types or later minor versions: ignored (RFC 37)
            }
        }
    }

    private void ready(byte[] b, int pos) throws ZmtpException {
        String socketType = null;
        byte[] identity = new byte[0];
        while (pos < b.length) {
            int nlen = b[pos] & 0xFF;
            if (nlen == 0 || pos + 1 + nlen + 4 > b.length) {
                throw error("malformed READY command: a property name of %d bytes at offset %d of %d", nlen, pos,
                        b.length);
            }
            String pname = new String(b, pos + 1, nlen, StandardCharsets.US_ASCII);
            pos += 1 + nlen;
            long vlen = ((b[pos] & 0xFFL) << 24) | ((b[pos + 1] & 0xFF) << 16) | ((b[pos + 2] & 0xFF) << 8)
                    | (b[pos + 3] & 0xFF);
            pos += 4;
            if (vlen > b.length - pos) {
                throw error("malformed READY command: property '%s' declares %d bytes, %d remain", printable(pname),
                        vlen, b.length - pos);
            }
            int v = (int) vlen;
            if (pname.equalsIgnoreCase(Zmtp.PROP_SOCKET_TYPE)) {
                if (socketType != null) {
                    throw error("malformed READY command: Socket-Type given twice");
                }
                socketType = new String(b, pos, v, StandardCharsets.US_ASCII);
            } else if (pname.equalsIgnoreCase(Zmtp.PROP_IDENTITY)) {
                if (v > Zmtp.MAX_IDENTITY_BYTES) {
                    throw error("malformed READY command: an Identity of %d bytes (at most %d)", v,
                            Zmtp.MAX_IDENTITY_BYTES);
                }
                identity = java.util.Arrays.copyOfRange(b, pos, pos + v);
            }
            pos += v;
        }
        if (socketType == null) {
            throw error("malformed READY command: no Socket-Type property");
        }
        if (!Zmtp.compatible(ourSocketType, socketType)) {
            throw error("incompatible socket types: this %s does not talk to a peer of type '%s'", ourSocketType,
                    printable(socketType));
        }
        peerReady = true;
        handler.onReady(socketType, identity);
    }

    /** At most 64 characters, control characters as '?': a peer's text in our log lines. */
    static String printable(String s) {
        StringBuilder b = new StringBuilder(Math.min(s.length(), 64));
        for (int i = 0; i < s.length() && i < 64; i++) {
            char c = s.charAt(i);
            b.append(c < 0x20 || c == 0x7F ? '?' : c);
        }
        return s.length() > 64 ? b.append("...").toString() : b.toString();
    }
}
