package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Replays frames captured from Mooncake's C++ engine ({@code src/test/resources/golden/cpp})
 * through the Java codecs and against a live {@link CoreEngine}, complementing
 * {@link CppGoldenFramesTest}: every captured handshake frame re-encodes byte for byte, the wire
 * codec reproduces the captured headers and status frames, and our target answers the captured
 * one-shot writes (v1 and v2), lane reads and an out-of-range write with the C++ target's bytes.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MooncakeGoldenReplayTest {

    private static final int MAX_FRAME = 1 << 20;
    private static final long BUFFER_BYTES = 1 << 20;

    private CoreEngine engine;
    private HostMemoryAllocator allocator;
    private HostMemoryStorage buffer;

    @BeforeEach
    void start() {
        engine = TcpEngines.started();
        allocator = new HostMemoryAllocator();
        buffer = allocator.allocate(BUFFER_BYTES);
        assertEquals(0, engine.registerMemory(buffer.address(), buffer.byteSize(), "cpu:0"));
    }

    @AfterEach
    void stop() {
        engine.close();
        allocator.close();
    }

    private static byte[] golden(String path) {
        try (InputStream in = MooncakeGoldenReplayTest.class.getResourceAsStream("/golden/cpp/" + path)) {
            assertNotNull(in, "missing golden file " + path);
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static HandshakeFrame decode(byte[] bytes) throws IOException {
        return HandshakeFrame.read(new ByteArrayInputStream(bytes), MAX_FRAME);
    }

    /** Sends {@code request}, half-closes, and returns everything the server sent until EOF (or reset). */
    private static byte[] exchange(int port, byte[] request) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(TcpEngines.LOOPBACK, port), 5000);
            s.setSoTimeout(10_000);
            s.getOutputStream().write(request);
            s.getOutputStream().flush();
            s.shutdownOutput();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            try {
                for (int n; (n = s.getInputStream().read(buf)) >= 0; ) {
                    got.write(buf, 0, n);
                }
            } catch (SocketException reset) {
                // a rejecting server may close with our body unread; what arrived before counts
            }
            return got.toByteArray();
        }
    }

    @Test
    void handshakeCodecReproducesEveryCapturedFrameByteForByte() throws IOException {
        for (String name : List.of("passive/initiator-metadata.req", "passive/target-metadata.rep",
                "active/hs-probe.req", "active/hs-probe.rep", "active/hs-connection.req", "active/hs-connection.rep",
                "active/hs-notify.req", "active/hs-notify.rep", "active/hs-legacy-connection.req",
                "active/hs-legacy-connection.rep")) {
            byte[] bytes = golden(name);
            HandshakeFrame f = decode(bytes);
            assertEquals(name.contains("legacy"), f.legacy(), name);
            assertArrayEquals(bytes, f.encode(), name + " re-encodes identically");
        }
    }

    @Test
    void wireCodecMatchesCapturedHeadersAndStatusFrames() {
        for (String name : List.of("v2-read-oneshot", "v2-write-oneshot", "v1-read-oneshot", "v1-write-oneshot")) {
            byte[] req = golden("passive/" + name + ".req");
            ByteBuffer b = ByteBuffer.wrap(req).order(ByteOrder.LITTLE_ENDIAN);
            byte[] ours = TcpWire.header(b.getLong(0), b.getLong(8), req[16] & 0xFF);
            assertArrayEquals(Arrays.copyOf(req, TcpWire.HEADER_BYTES), ours, name);
        }
        assertArrayEquals(golden("passive/v2-write-oneshot.rep"), TcpWire.status(TcpWire.STATUS_OK));
        assertArrayEquals(golden("active/data-v2-write-rejected.rep"), TcpWire.status(TcpWire.STATUS_ADDR_REJECTED));
    }

    /** The captured target's buffer base: request addresses are rebased from it onto ours. */
    private static long capturedTargetBase() throws Exception {
        return SegmentDescriptor.parse(decode(golden("passive/target-metadata.rep")).json()).buffers().get(0).addr();
    }

    /** Copies a captured request stream with every header address moved from the C++ buffer to ours. */
    private byte[] rebased(byte[] requests) throws Exception {
        long from = capturedTargetBase();
        byte[] out = requests.clone();
        ByteBuffer b = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        int off = 0;
        while (off < out.length) {
            long size = b.getLong(off);
            long addr = b.getLong(off + 8);
            long rel = addr - from;
            assertTrue(rel >= 0 && rel + size <= BUFFER_BYTES, "captured request inside the first MiB");
            b.putLong(off + 8, buffer.address() + rel);
            boolean write = (out[off + 16] & 0x7F) == TcpWire.OP_WRITE;
            off += TcpWire.HEADER_BYTES + (write ? (int) size : 0);
        }
        assertEquals(out.length, off);
        return out;
    }

    /** The one-shot reads and the write lane are replayed by {@link CppGoldenFramesTest}; these are the rest. */
    @Test
    void ourDataServerAnswersCapturedWritesAndLaneReadsLikeTheCppServer() throws Exception {
        int port = TcpTransport.in(engine).dataPort();
        for (String name : List.of("v2-write-oneshot", "v1-write-oneshot", "v2-read-lane")) {
            byte[] answer = exchange(port, rebased(golden("passive/" + name + ".req")));
            assertArrayEquals(golden("passive/" + name + ".rep"), answer, name);
        }
    }

    @Test
    void ourDataServerRejectsTheCapturedOutOfRangeWriteWithTheSameStatus() throws Exception {
        byte[] answer = exchange(TcpTransport.in(engine).dataPort(), golden("active/data-v2-write-rejected.req"));
        assertArrayEquals(golden("active/data-v2-write-rejected.rep"), answer);
    }
}
