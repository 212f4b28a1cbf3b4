package io.mooncake4j.engine.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Slow clients and slow servers on the handshake port: a peer that trickles or stalls is cut at the
 * request deadline and holds no thread beyond it.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HandshakeDeadlineTest {

    private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
    private HandshakeServer server;
    private final List<Socket> sockets = new ArrayList<>();

    private HandshakeServer start(HandshakeConfig cfg) throws IOException {
        server = HandshakeServer.start(cfg, (type, req) -> "{\"status\":\"success\"}\n");
        return server;
    }

    @AfterEach
    void stop() throws IOException {
        for (Socket s : sockets) {
            s.close();
        }
        if (server != null) {
            server.close();
        }
    }

    private Socket connect(int port) throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.connect(new InetSocketAddress(LOOPBACK, port), 5000);
        s.setSoTimeout(10_000);
        return s;
    }

    private static void awaitTrue(java.util.function.BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.onSpinWait();
        }
    }

    @Test
    void slowlorisConnectionsCannotKeepANewPeerFromBeingServed() throws Exception {
        // a long deadline: what saves the new peer here is the cap closing the oldest connections
        HandshakeConfig cfg = HandshakeConfig.ephemeral(LOOPBACK).withRequestLimits(60_000, 10_000, 8);
        start(cfg);
        for (int i = 0; i < 64; i++) {
            connect(server.port()).getOutputStream().write(new byte[] {4, 0, 0}); // 3 of 8 length bytes
        }
        awaitTrue(() -> server.evictedConnections() >= 56, "the cap to close the oldest slow connections");
        long t0 = System.nanoTime();
        new HandshakeClient(cfg).probe(new PeerAddress("127.0.0.1", server.port()));
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5), "probe served despite 64 slow clients");
        assertTrue(server.openConnections() <= 8, "open " + server.openConnections());
    }

    @Test
    void tricklingClientIsClosedAtTheTotalRequestDeadline() throws Exception {
        start(HandshakeConfig.ephemeral(LOOPBACK).withTimeouts(5_000, 60_000).withRequestLimits(400, 10_000, 256));
        long t0 = System.nanoTime(); // before connect: the server's deadline runs from its accept
        Socket s = connect(server.port());
        OutputStream out = s.getOutputStream();
        // a 1000-byte frame, one byte every 20 ms: every read is far inside the 5 s read timeout
        byte[] frame = new byte[1008];
        frame[0] = (byte) 0xe8;
        frame[1] = 0x03;
        frame[8] = HandshakeFrame.PROBE;
        for (int i = 0; i < frame.length && server.expiredConnections() == 0; i++) {
            try {
                out.write(frame[i]);
                out.flush();
            } catch (IOException e) {
                break; // reset by the server
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // pacing the trickle, not synchronising
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        awaitTrue(() -> server.expiredConnections() == 1, "the deadline to close the connection");
        assertTrue(ms >= 350 && ms < 10_000, "closed at the 400 ms deadline, took " + ms + " ms");
        InputStream in = s.getInputStream();
        try {
            assertEquals(-1, in.read(), "no reply to an incomplete frame");
        } catch (IOException e) {
            // reset: closed as well
        }
        new HandshakeClient(HandshakeConfig.ephemeral(LOOPBACK)).probe(new PeerAddress("127.0.0.1", server.port()));
    }

    @Test
    void clientGivesUpAtItsTotalDeadlineOnATricklingServer() throws Exception {
        try (ServerSocket fake = new ServerSocket(0, 8, LOOPBACK)) {
            Thread t = Thread.ofVirtual().start(() -> {
                try (Socket c = fake.accept()) {
                    OutputStream out = c.getOutputStream();
                    out.write(new byte[] {(byte) 0xe8, 3, 0, 0, 0, 0, 0, 0, HandshakeFrame.PROBE});
                    for (int i = 0; i < 1000; i++) {
                        out.write('{');
                        out.flush();
                        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // trickle pacing
                    }
                } catch (IOException e) {
                    // the client closed: expected
                }
            });
            HandshakeConfig cfg = HandshakeConfig.ephemeral(LOOPBACK).withRequestLimits(10_000, 400, 256);
            long t0 = System.nanoTime();
            HandshakeException e = assertThrows(HandshakeException.class,
                    () -> new HandshakeClient(cfg).probe(new PeerAddress("127.0.0.1", fake.getLocalPort())));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(ms >= 350 && ms < 10_000, "gave up at the 400 ms deadline, took " + ms + " ms: " + e);
            t.join(10_000);
        }
    }
}
