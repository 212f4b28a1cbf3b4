package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Idle connections on the data port cost no platform thread and are closed, so that peers that
 * connect and go quiet cannot pile up threads or sockets.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DataPortIdleConnectionsTest {

    private static final int LEN = 64 * 1024;
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private final List<Socket> sockets = new ArrayList<>();
    private CoreEngine engine;
    private CoreEngine initiator;
    private HostMemoryStorage buf;

    private CoreEngine start(TcpConfig cfg) {
        engine = TcpEngines.started(cfg);
        buf = alloc.allocate(LEN);
        assertEquals(0, engine.registerMemory(buf.address(), LEN, "cpu:0"));
        return engine;
    }

    @AfterEach
    void stop() throws IOException {
        for (Socket s : sockets) {
            s.close();
        }
        if (initiator != null) {
            initiator.close();
        }
        if (engine != null) {
            engine.close();
        }
        alloc.close();
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        sockets.add(s);
        s.connect(new InetSocketAddress("127.0.0.1", TcpTransport.in(engine).dataPort()), 5000);
        s.setSoTimeout(10_000);
        return s;
    }

    private static void await(BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.onSpinWait();
        }
    }

    private static boolean closedByPeer(Socket s) {
        try {
            return s.getInputStream().read() < 0;
        } catch (IOException e) {
            return true; // reset: closed as well
        }
    }

    /** A verified write and read-back through a second engine. */
    private void assertServes() {
        if (initiator == null) {
            initiator = TcpEngines.started();
        }
        HostMemoryStorage local = alloc.allocate(4096);
        assertEquals(0, initiator.registerMemory(local.address(), 4096, "cpu:0"));
        for (int i = 0; i < 4096; i++) {
            local.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 3));
        }
        String target = engine.getLocalSegmentName();
        assertEquals(0, initiator.batchTransferSyncWrite(target, new long[] {local.address()},
                new long[] {buf.address()}, new long[] {4096}));
        byte[] expected = local.segment().asSlice(0, 4096).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        assertArrayEquals(expected, buf.segment().asSlice(0, 4096).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
    }

    @Test
    void manyIdleConnectionsCostNoPlatformThread() throws Exception {
        start(TcpEngines.config().withDataLimits(600_000, 4096));
        int before = Thread.getAllStackTraces().size(); // platform threads only
        for (int i = 0; i < 400; i++) {
            connect();
        }
        await(() -> TcpTransport.in(engine).openDataSessions() == 400, "400 data sessions");
        int during = Thread.getAllStackTraces().size();
        // virtual-thread carriers may start (at most one per core) but nothing per connection
        assertTrue(during - before <= Runtime.getRuntime().availableProcessors() + 2,
                "platform threads " + before + " -> " + during + " for 400 idle connections");
        assertServes();
    }

    @Test
    void idleConnectionsAreClosedAfterTheIdleTimeout() throws Exception {
        start(TcpEngines.config().withDataLimits(300, 4096));
        long t0 = System.nanoTime();
        List<Socket> idle = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            idle.add(connect());
        }
        Socket midHeader = connect();
        midHeader.getOutputStream().write(new byte[10]); // 10 of 24 header bytes, then nothing
        for (Socket s : idle) {
            assertTrue(closedByPeer(s), "an idle connection was closed");
        }
        assertTrue(closedByPeer(midHeader), "a connection stalled inside a header was closed");
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 250, "closed only after the 300 ms idle timeout, took " + ms + " ms");
        await(() -> TcpTransport.in(engine).openDataSessions() == 0, "no data session left");
        assertTrue(TcpTransport.in(engine).idleClosedDataSessions() >= 21);
        assertServes();
    }

    @Test
    void sessionsPausingAroundTheGracePeriodKeepTheirBytes() throws Exception {
        start(TcpEngines.config());
        for (int i = 0; i < LEN; i++) {
            buf.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 5 + 1));
        }
        List<java.util.concurrent.Future<?>> clients = new ArrayList<>();
        try (var pool = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
            for (int c = 0; c < 8; c++) {
                int client = c;
                clients.add(pool.submit(() -> {
                    try (Socket s = connect()) {
                        OutputStream out = s.getOutputStream();
                        InputStream in = s.getInputStream();
                        java.util.Random r = new java.util.Random(client);
                        for (int k = 0; k < 30; k++) {
                            int off = r.nextInt(LEN - 4096);
                            int len = 1 + r.nextInt(4096);
                            out.write(TcpWire.header(len, buf.address() + off, 0x80));
                            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8));
                            assertArrayEquals(buf.segment().asSlice(off, len).toArray(
                                    java.lang.foreign.ValueLayout.JAVA_BYTE), in.readNBytes(len), "request " + k);
                            // pauses around the 50 ms grace period: the session moves between a pooled
                            // platform thread and a virtual one (pacing, not synchronisation)
                            java.util.concurrent.locks.LockSupport.parkNanos(
                                    TimeUnit.MILLISECONDS.toNanos(30 + r.nextInt(50)));
                        }
                    }
                    return null;
                }));
            }
            for (var f : clients) {
                f.get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void connectionsBeyondTheCapCloseTheLongestIdle() throws Exception {
        start(TcpEngines.config().withDataLimits(600_000, 8));
        List<Socket> first = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            first.add(connect());
            int n = i + 1;
            await(() -> TcpTransport.in(engine).openDataSessions() == n, n + " sessions");
        }
        Socket ninth = connect();
        assertTrue(closedByPeer(first.get(0)), "the longest-idle connection made room");
        await(() -> TcpTransport.in(engine).openDataSessions() <= 8, "at most 8 sessions");
        // the newest connection is served: a v2 write of 8 bytes gets its OK status
        OutputStream out = ninth.getOutputStream();
        out.write(TcpWire.header(8, buf.address(), 0x80));
        out.write(new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
        InputStream in = ninth.getInputStream();
        assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8));
    }
}
