package io.mooncake4j.store;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A scripted coro_rpc server on a loopback port for the bad-input tests: it reads request frames
 * and writes whatever bytes the script returns for each (valid replies, broken ones, nothing).
 */
final class FakeMaster implements AutoCloseable {

    /** One request as received. */
    record Request(int seq, int functionId, byte[] body, int connection) {}

    /** What to write for a request: raw bytes (possibly several frames, possibly garbage); null closes. */
    interface Script {
        byte[] answer(Request r) throws IOException;
    }

    private final ServerSocket server;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger connections = new AtomicInteger();
    private volatile Script script;

    FakeMaster(Script script) throws IOException {
        this.script = script;
        server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::acceptLoop, "fake-master");
        t.setDaemon(true);
        t.start();
    }

    void script(Script s) {
        script = s;
    }

    InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
    }

    int connections() {
        return connections.get();
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                sockets.add(s);
                int id = connections.incrementAndGet();
                Thread t = new Thread(() -> serve(s, id), "fake-master-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s, int id) {
        try (s) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            byte[] head = new byte[20];
            while (true) {
                in.readFully(head);
                int seq = le(head, 4);
                int fid = le(head, 8);
                byte[] body = new byte[le(head, 12)];
                in.readFully(body);
                byte[] answer = script.answer(new Request(seq, fid, body, id));
                if (answer == null) {
                    return;
                }
                out.write(answer);
                out.flush();
                if (CLOSE_AFTER.contains(answer)) {
                    return;
                }
            }
        } catch (IOException e) {
            // the client closed or the script ended the connection
        }
    }

    private static final java.util.Set<byte[]> CLOSE_AFTER =
            java.util.Collections.synchronizedSet(java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>()));

    /** {@return {@code bytes}, marked so that the server closes the connection after writing them} */
    static byte[] thenClose(byte[] bytes) {
        CLOSE_AFTER.add(bytes);
        return bytes;
    }

    static int le(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }

    /** {@return a reply frame: header (magic 21, version 0, err, seq, length) and body} */
    static byte[] reply(int seq, int err, byte[] body) {
        byte[] f = new byte[16 + body.length];
        f[0] = 21;
        f[2] = (byte) err;
        put(f, 4, seq);
        put(f, 8, body.length);
        System.arraycopy(body, 0, f, 16, body.length);
        return f;
    }

    static void put(byte[] b, int off, int v) {
        for (int i = 0; i < 4; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int o = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : sockets) {
            s.close();
        }
    }
}
