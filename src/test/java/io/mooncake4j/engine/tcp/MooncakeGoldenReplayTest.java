package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
 * Replays frames captured from Mooncake's C++ engine ({@code src/test/resources/golden/mooncake})
 * through the Java codecs and against a live {@link TcpTransferEngine}: the codecs must reproduce
 * the C++ bytes exactly, and our target must answer the C++ initiator's requests with the bytes the
 * C++ target answered.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MooncakeGoldenReplayTest {

    private static final int MAX_FRAME = 1 << 20;
    private static final long BUFFER_BYTES = 1 << 20;

    private TcpTransferEngine engine;
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
        try (InputStream in = MooncakeGoldenReplayTest.class.getResourceAsStream("/golden/mooncake/" + path)) {
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
        for (String name : List.of("metadata-request", "metadata-reply", "probe-request", "probe-reply",
                "connection-request", "connection-reply", "notify-request", "notify-reply",
                "legacy-connection-request", "legacy-connection-reply")) {
            byte[] bytes = golden("handshake/" + name + ".bin");
            HandshakeFrame f = decode(bytes);
            assertEquals(name.startsWith("legacy"), f.legacy(), name);
            assertArrayEquals(bytes, f.encode(), name + " re-encodes identically");
        }
    }

    @Test
    void descriptorCodecReproducesTheCppDescriptors() throws Exception {
        for (String name : List.of("metadata-request", "metadata-reply")) {
            String json = decode(golden("handshake/" + name + ".bin")).json();
            SegmentDescriptor d = SegmentDescriptor.parse(json);
            assertEquals("tcp", d.protocol());
            assertEquals(2, d.tcpProtoVersion());
            assertEquals(1, d.buffers().size());
            assertEquals(json, d.toJson(), name);
        }
    }

    @Test
    void wireCodecMatchesCapturedHeadersAndStatusFrames() {
        for (String name : List.of("v2-read-request", "v2-write-request", "v1-read-request", "v1-write-request")) {
            byte[] req = golden("data/" + name + ".bin");
            ByteBuffer b = ByteBuffer.wrap(req).order(ByteOrder.LITTLE_ENDIAN);
            byte[] ours = TcpWire.header(b.getLong(0), b.getLong(8), req[16] & 0xFF);
            assertArrayEquals(Arrays.copyOf(req, TcpWire.HEADER_BYTES), ours, name);
        }
        assertArrayEquals(golden("data/v2-write-response.bin"), TcpWire.status(TcpWire.STATUS_OK));
        assertArrayEquals(golden("data/v2-status-addr-rejected.bin"), TcpWire.status(TcpWire.STATUS_ADDR_REJECTED));
    }

    @Test
    void ourHandshakeServerAnswersCapturedRequestsLikeTheCppServer() throws Exception {
        int rpc = engine.getRpcPort();
        for (String name : List.of("probe", "connection", "notify", "legacy-connection")) {
            assertArrayEquals(golden("handshake/" + name + "-reply.bin"),
                    exchange(rpc, golden("handshake/" + name + "-request.bin")), name);
        }
        HandshakeFrame reply = decode(exchange(rpc, golden("handshake/metadata-request.bin")));
        assertEquals(HandshakeFrame.METADATA, reply.type());
        SegmentDescriptor d = SegmentDescriptor.parse(reply.json());
        assertEquals(engine.getLocalSegmentName(), d.name());
        assertEquals(List.of(SegmentDescriptor.Buffer.tcp(d.name(), buffer.address(), BUFFER_BYTES)), d.buffers());
    }

    /** The captured target's buffer base: request addresses are rebased from it onto ours. */
    private static long capturedTargetBase() throws Exception {
        return SegmentDescriptor.parse(decode(golden("handshake/metadata-reply.bin")).json()).buffers().get(0).addr();
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

    @Test
    void ourDataServerAnswersCapturedRequestsLikeTheCppServer() throws Exception {
        int port = engine.getDataPort();
        for (String name : List.of("v2-read", "v2-write", "v1-read", "v1-write")) {
            byte[] answer = exchange(port, rebased(golden("data/" + name + "-request.bin")));
            assertArrayEquals(golden("data/" + name + "-response.bin"), answer, name);
        }
        for (String op : List.of("read", "write")) {
            byte[] answer = exchange(port, rebased(golden("data/v2-lane-" + op + "-3-requests.bin")));
            assertArrayEquals(golden("data/v2-lane-" + op + "-3-responses.bin"), answer, "lane " + op);
        }
    }

    @Test
    void ourDataServerRejectsTheCapturedOutOfRangeWriteWithTheSameStatus() throws Exception {
        byte[] answer = exchange(engine.getDataPort(), golden("data/v2-write-rejected-request.bin"));
        assertArrayEquals(golden("data/v2-status-addr-rejected.bin"), answer);
    }
}
