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
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Raw requests against the data port: validation, rejections, v1/v2 exchanges, broken peers. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class DataPortRobustnessTest {

    private static final int LEN = 1 << 20;
    private HostMemoryAllocator alloc;
    private HostMemoryStorage buf;
    private HostMemoryStorage neighbour;
    private CoreEngine engine;

    @BeforeEach
    void start() {
        alloc = new HostMemoryAllocator();
        buf = alloc.allocate(LEN);
        neighbour = alloc.allocate(LEN);
        engine = TcpEngines.started();
        assertEquals(0, engine.registerMemory(buf.address(), LEN, "cpu:0"));
        buf.segment().fill((byte) 0x11);
    }

    @AfterEach
    void stop() {
        engine.close();
        alloc.close();
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", TcpTransport.in(engine).dataPort()), 5000);
        s.setSoTimeout(10_000);
        return s;
    }

    private static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        return b;
    }

    private void assertUntouched() {
        MemorySegment expected = MemorySegment.ofArray(new byte[LEN]).fill((byte) 0x11);
        assertEquals(-1, buf.segment().mismatch(expected), "registered memory changed");
    }

    /** Sends a header (and body) and returns all bytes received until the server closes. */
    private byte[] rejectedExchange(long size, long addr, int opcode, byte[] body) throws IOException {
        try (Socket s = connect()) {
            OutputStream out = s.getOutputStream();
            out.write(TcpWire.header(size, addr, opcode));
            if (body != null) {
                try {
                    out.write(body);
                } catch (IOException e) {
                    // the server may close before reading the body
                }
            }
            return s.getInputStream().readAllBytes();
        }
    }

    @Test
    void v2WriteOutsideRegisteredMemoryIsRejectedWithStatusAndTouchesNothing() throws IOException {
        long rejectedBefore = TcpTransport.in(engine).rejectedDataRequests();
        byte[] got = rejectedExchange(64, buf.address() + LEN - 32, 0x81, pattern(64, 1));
        assertArrayEquals(TcpWire.status(TcpWire.STATUS_ADDR_REJECTED), got);
        assertUntouched();
        assertEquals(rejectedBefore + 1, TcpTransport.in(engine).rejectedDataRequests());
        assertEquals(TcpTransport.in(engine).rejectedDataRequests(), engine.counters().rejectedDataRequests());
    }

    @Test
    void v1RequestOutsideRegisteredMemoryIsClosedWithoutReply() throws IOException {
        assertEquals(0, rejectedExchange(64, buf.address() - 64, 0x01, pattern(64, 1)).length);
        assertEquals(0, rejectedExchange(64, neighbour.address(), 0x00, null).length);
        assertUntouched();
    }

    @Test
    void overflowingZeroAndSpanningRangesAreRejected() throws IOException {
        byte[] rejected = TcpWire.status(TcpWire.STATUS_ADDR_REJECTED);
        assertArrayEquals(rejected, rejectedExchange(-1L, buf.address(), 0x80, null), "size 2^64-1");
        assertArrayEquals(rejected, rejectedExchange(Long.MIN_VALUE, buf.address() + 8, 0x81, null), "size 2^63");
        assertArrayEquals(rejected, rejectedExchange(0, buf.address(), 0x81, null), "size 0");
        assertArrayEquals(rejected, rejectedExchange(16, -8L, 0x80, null), "wraps past 2^64");
        try (HostMemoryAllocator a2 = new HostMemoryAllocator()) {
            HostMemoryStorage big = a2.allocate(2 * 65536);
            long mid = big.address() + 65536;
            assertEquals(0, engine.registerMemory(big.address(), 65536, "cpu:0"));
            assertEquals(0, engine.registerMemory(mid, 65536, "cpu:0"));
            assertArrayEquals(rejected, rejectedExchange(4096, mid - 2048, 0x80, null), "spans adjacent buffers");
        }
        assertUntouched();
    }

    @Test
    void unknownOpcodeIsRejected() throws IOException {
        assertArrayEquals(TcpWire.status(TcpWire.STATUS_ADDR_REJECTED),
                rejectedExchange(16, buf.address(), 0x85, pattern(16, 0)));
        assertEquals(0, rejectedExchange(16, buf.address(), 0x7f, pattern(16, 0)).length);
        assertUntouched();
    }

    @Test
    void pipelinedV2WriteAndReadOnOneConnection() throws IOException {
        byte[] body = pattern(4096, 7);
        try (Socket s = connect()) {
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            out.write(TcpWire.header(4096, buf.address() + 8192, 0x81));
            out.write(body);
            out.write(TcpWire.header(4096, buf.address() + 8192, 0x80));
            out.write(TcpWire.header(8, buf.address(), 0x80));
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8), "write ack");
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8), "read status");
            assertArrayEquals(body, in.readNBytes(4096));
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8));
            byte[] ones = new byte[8];
            Arrays.fill(ones, (byte) 0x11);
            assertArrayEquals(ones, in.readNBytes(8));
        }
        assertArrayEquals(body, buf.segment().asSlice(8192, 4096).toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void v1WriteAndReadHaveNoStatusFrames() throws IOException {
        byte[] body = pattern(1000, 3);
        try (Socket s = connect()) {
            s.getOutputStream().write(TcpWire.header(1000, buf.address() + 5, 0x01));
            s.getOutputStream().write(body);
            s.getOutputStream().write(TcpWire.header(1000, buf.address() + 5, 0x00));
            assertArrayEquals(body, s.getInputStream().readNBytes(1000));
        }
    }

    @Test
    void manyConcurrentOneShotConnectionsLikeMooncakesDefaultClient() throws Exception {
        int n = 200;
        java.util.List<java.util.concurrent.Future<byte[]>> replies = new java.util.ArrayList<>();
        try (var pool = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
            for (int k = 0; k < n; k++) {
                int kk = k;
                replies.add(pool.submit(() -> {
                    try (Socket s = connect()) {
                        s.getOutputStream().write(TcpWire.header(4096, buf.address() + kk * 4096L, 0x81));
                        s.getOutputStream().write(pattern(4096, kk));
                        return s.getInputStream().readNBytes(8);
                    }
                }));
            }
            for (var f : replies) {
                assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), f.get(20, TimeUnit.SECONDS));
            }
        }
        for (int k = 0; k < n; k += 17) {
            assertArrayEquals(pattern(4096, k), buf.segment().asSlice(k * 4096L, 4096).toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void peerDisconnectingMidBodyLeavesTargetServing() throws IOException {
        try (Socket s = connect()) {
            s.getOutputStream().write(TcpWire.header(LEN, buf.address(), 0x81));
            s.getOutputStream().write(pattern(1000, 1));
        }
        try (Socket s = connect()) {
            s.getOutputStream().write(TcpWire.header(24, buf.address(), 0x80)); // half a header
            s.getOutputStream().write(new byte[5]);
        }
        try (Socket s = connect()) {
            // away from the first 1000 bytes, which the aborted session may still be writing
            s.getOutputStream().write(TcpWire.header(16, buf.address() + 8192, 0x81));
            s.getOutputStream().write(pattern(16, 9));
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), s.getInputStream().readNBytes(8));
        }
        assertArrayEquals(pattern(16, 9), buf.segment().asSlice(8192, 16).toArray(ValueLayout.JAVA_BYTE));
        assertTrue(TcpTransport.in(engine).dataPort() > 0);
    }
}
