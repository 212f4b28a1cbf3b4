package io.mooncake4j.connector.worker;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A loopback port forwarder (what a NAT or {@code ssh -L} does): connections to its own port are piped
 * to the target port. Platform daemon threads (not virtual ones, whose few shared carriers another
 * test's pinned threads could hold while a transfer waits on this forwarder); {@link #close()} closes
 * every socket and ends them.
 */
final class TcpForwarder implements AutoCloseable {

    private final ServerSocket listener;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger connections = new AtomicInteger();
    private volatile int target;

    TcpForwarder() throws IOException {
        listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread.ofPlatform().daemon().name("test-forwarder-accept").start(this::accept);
    }

    /** Forwards to {@code port} from now on; its own port, to name instead of {@code port}. */
    int forwardTo(int port) {
        target = port;
        return listener.getLocalPort();
    }

    int connections() {
        return connections.get();
    }

    private void accept() {
        while (!listener.isClosed()) {
            Socket in;
            try {
                in = listener.accept();
            } catch (IOException e) {
                return; // closed
            }
            sockets.add(in);
            Socket out = new Socket();
            sockets.add(out);
            try {
                out.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), target), 10_000);
            } catch (IOException e) {
                // as a forwarder does: this connection fails, the next one is still forwarded
                closeQuietly(in);
                closeQuietly(out);
                continue;
            }
            connections.incrementAndGet();
            Thread.ofPlatform().daemon().start(() -> pipe(in, out));
            Thread.ofPlatform().daemon().start(() -> pipe(out, in));
        }
    }

    private static void pipe(Socket from, Socket to) {
        try (InputStream i = from.getInputStream(); OutputStream o = to.getOutputStream()) {
            i.transferTo(o);
        } catch (IOException e) {
            // one side closed: the other follows
        } finally {
            try {
                to.shutdownOutput();
            } catch (IOException e) {
                // already closed
            }
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // closing a socket that failed to connect
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        for (Socket s : sockets) {
            s.close();
        }
    }
}
