package io.mooncake4j.fuzz;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * A hand-written ZMTP 3.0 peer over a plain TCP socket (NULL mechanism), to speak to ZMTP
 * sockets (ours, JeroMQ's) the way an attacker or a broken peer would: exact greetings, READY commands and frame
 * headers, including ones that declare frames far larger than anything it then sends. Not
 * thread-safe; closes its socket.
 */
public final class ZmtpPeer implements AutoCloseable {

    /** ZMTP frame flags. */
    public static final int MORE = 0x01;
    public static final int LARGE = 0x02;
    public static final int COMMAND = 0x04;

    private final Socket socket;
    private final OutputStream out;
    private final DataInputStream in;

    private ZmtpPeer(Socket socket) throws IOException {
        this.socket = socket;
        socket.setTcpNoDelay(true);
        this.out = socket.getOutputStream();
        this.in = new DataInputStream(socket.getInputStream());
    }

    /** Connects to {@code 127.0.0.1:port}; reads time out after {@code readTimeout}. */
    public static ZmtpPeer connect(int port, Duration readTimeout) throws IOException {
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress("127.0.0.1", port), 5_000);
            s.setSoTimeout((int) readTimeout.toMillis());
            return new ZmtpPeer(s);
        } catch (IOException e) {
            s.close();
            throw e;
        }
    }

    /**
     * A fake server side: accepts connections on {@code server} until one completes the greeting and
     * READY exchange (we announce {@code mySocketType}; the client's READY is read), within
     * {@code total}. A client may drop a slow handshake and reconnect (D's handshake timeout), so
     * a connection the client closes is dropped and the next one taken. A connection that is only slow
     * is waited for until {@code total} runs out, as P's real ROUTER would (it allows 10 s): a fake
     * that closed it for being slow (a loaded machine) would see no complete handshake before
     * {@code total} (CI once: "Accept timed out").
     */
    public static ZmtpPeer acceptHandshaken(java.net.ServerSocket server, String mySocketType, Duration total)
            throws IOException {
        long deadline = System.nanoTime() + total.toNanos();
        IOException last = null;
        int accepted = 0;
        while (System.nanoTime() - deadline < 0) {
            server.setSoTimeout((int) Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            Socket s;
            try {
                s = server.accept();
            } catch (SocketTimeoutException e) {
                break;
            }
            accepted++;
            ZmtpPeer z = accepted(s, Duration.ofMillis(Math.max(1, (deadline - System.nanoTime()) / 1_000_000)));
            try {
                z.write(greeting());
                z.readGreeting();
                z.write(ready(mySocketType));
                byte[] r = z.readFrame();
                if ((r[0] & COMMAND) == 0) {
                    throw new IOException("expected the client's READY command");
                }
                s.setSoTimeout(30_000); // bounds a read that waits for an event only when the event never comes
                return z;
            } catch (IOException e) {
                last = e;
                z.close();
            }
        }
        throw new IOException("no client completed the ZMTP handshake within " + total + " (" + accepted
                + " connection(s) accepted)", last);
    }

    /** Wraps an accepted connection (a fake server side). */
    public static ZmtpPeer accepted(Socket s, Duration readTimeout) throws IOException {
        s.setSoTimeout((int) readTimeout.toMillis());
        return new ZmtpPeer(s);
    }

    /** The 64-byte ZMTP 3.0 greeting with the NULL mechanism. */
    public static byte[] greeting() {
        byte[] g = new byte[64];
        g[0] = (byte) 0xFF;
        g[9] = 0x7F;
        g[10] = 3; // major
        g[11] = 0; // minor
        byte[] mech = "NULL".getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(mech, 0, g, 12, mech.length);
        return g;
    }

    /** A READY command announcing {@code socketType} (e.g. DEALER, ROUTER). */
    public static byte[] ready(String socketType) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(5);
        body.writeBytes("READY".getBytes(StandardCharsets.US_ASCII));
        byte[] name = "Socket-Type".getBytes(StandardCharsets.US_ASCII);
        byte[] value = socketType.getBytes(StandardCharsets.US_ASCII);
        body.write(name.length);
        body.writeBytes(name);
        body.writeBytes(new byte[] {0, 0, 0, (byte) value.length});
        body.writeBytes(value);
        return frame(COMMAND, body.toByteArray());
    }

    /** A complete frame with {@code flags} (short form when it fits, else LARGE). */
    public static byte[] frame(int flags, byte[] body) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        if (body.length <= 255) {
            b.write(flags & ~LARGE);
            b.write(body.length);
        } else {
            b.writeBytes(longHeader(flags, body.length));
        }
        b.writeBytes(body);
        return b.toByteArray();
    }

    /** A LARGE frame header (flags | 0x02, 8-byte big-endian size) declaring {@code size} bytes. */
    public static byte[] longHeader(int flags, long size) {
        byte[] h = new byte[9];
        h[0] = (byte) (flags | LARGE);
        for (int i = 0; i < 8; i++) {
            h[1 + i] = (byte) (size >>> (56 - 8 * i));
        }
        return h;
    }

    public void write(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
    }

    /** Reads the peer's 64-byte greeting; fails unless it is ZMTP 3 with the NULL mechanism. */
    public void readGreeting() throws IOException {
        byte[] g = new byte[64];
        in.readFully(g);
        if ((g[0] & 0xFF) != 0xFF || g[9] != 0x7F || g[10] < 3) {
            throw new IOException("not a ZMTP 3 greeting");
        }
    }

    /** Reads one frame; returns its flags in the first byte of the result followed by its body. */
    public byte[] readFrame() throws IOException {
        int flags = in.readUnsignedByte();
        long size = (flags & LARGE) != 0 ? in.readLong() : in.readUnsignedByte();
        if (size > 64 << 20) {
            throw new IOException("frame of " + size + " bytes");
        }
        byte[] b = new byte[(int) size + 1];
        b[0] = (byte) flags;
        in.readFully(b, 1, (int) size);
        return b;
    }

    /** Greeting and READY both ways, as a client (we write first). */
    public void handshake(String mySocketType) throws IOException {
        write(greeting());
        readGreeting();
        write(ready(mySocketType));
        byte[] r = readFrame();
        if ((r[0] & COMMAND) == 0) {
            throw new IOException("expected the peer's READY command");
        }
    }

    /** Whether the peer closed (or reset) the connection within the read timeout; reads and drops what comes. */
    public boolean closedByPeer() throws IOException {
        InputStream s = socket.getInputStream();
        byte[] buf = new byte[4096];
        try {
            while (true) {
                if (s.read(buf) < 0) {
                    return true;
                }
            }
        } catch (SocketTimeoutException e) {
            return false;
        } catch (EOFException | SocketException e) {
            return true;
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
