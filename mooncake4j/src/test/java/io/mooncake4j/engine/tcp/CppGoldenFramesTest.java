package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Frames captured from the C++ Mooncake engine (src/test/resources/golden/cpp): our codecs
 * decode and re-encode them byte for byte, and the Java engine answers the same requests with
 * the same bytes.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CppGoldenFramesTest {

    private static final long CPP_BASE = 0x7F7EFF000000L;
    private static final long CPP_LEN = 96L << 20;
    private static final int LEN = 1 << 20;

    private HostMemoryAllocator alloc;
    private HostMemoryStorage buf;
    private CoreEngine engine;

    @BeforeEach
    void start() {
        alloc = new HostMemoryAllocator();
        buf = alloc.allocate(LEN);
        engine = TcpEngines.started();
        assertEquals(0, engine.registerMemory(buf.address(), LEN, "cpu:0"));
    }

    @AfterEach
    void stop() {
        engine.close();
        alloc.close();
    }

    static byte[] golden(String path) {
        try (InputStream in = CppGoldenFramesTest.class.getResourceAsStream("/golden/cpp/" + path)) {
            if (in == null) {
                throw new IllegalStateException("missing test vector " + path);
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static byte[] exchange(int port, byte[] request) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 5000);
            s.setSoTimeout(10_000);
            s.getOutputStream().write(request);
            s.shutdownOutput();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            try {
                s.getInputStream().transferTo(got);
            } catch (java.net.SocketException e) {
                // reset after the reply (unread request bytes on the server): keep what arrived
            }
            return got.toByteArray();
        }
    }

    @Test
    void handshakeRepliesEqualTheCppRepliesByteForByte() throws IOException {
        for (String name : new String[] {"hs-probe", "hs-notify", "hs-connection", "hs-legacy-connection"}) {
            assertArrayEquals(golden("active/" + name + ".rep"),
                    exchange(engine.getRpcPort(), golden("active/" + name + ".req")), name);
        }
    }

    @Test
    void malformedHandshakesGetNoReplyLikeTheCppServer() throws IOException {
        for (String name : new String[] {"hs-bad-json", "hs-unknown-type-0x80", "hs-zero-length"}) {
            assertEquals(0, exchange(engine.getRpcPort(), golden("active/" + name + ".req")).length, name);
        }
    }

    @Test
    void cppDescriptorsDecodeAndReEncodeIdentically() throws Exception {
        for (String name : new String[] {"active/hs-metadata-empty-body.rep", "passive/target-metadata.rep",
            "passive/initiator-metadata.req"}) {
            HandshakeFrame f = HandshakeFrame.read(new ByteArrayInputStream(golden(name)), 1 << 20);
            assertEquals(HandshakeFrame.METADATA, f.type(), name);
            SegmentDescriptor d = SegmentDescriptor.parse(f.json());
            assertEquals("tcp", d.protocol());
            assertEquals(2, d.tcpProtoVersion());
            assertEquals(f.json(), d.toJson(), name);
            assertArrayEquals(golden(name), f.encode(), name);
        }
        HandshakeFrame req = HandshakeFrame.read(new ByteArrayInputStream(golden("active/hs-metadata-empty-body.req")),
                1 << 20);
        assertArrayEquals(golden("active/hs-metadata-empty-body.req"), req.encode());
    }

    @Test
    void ourMetadataReplyHasTheCppLayout() throws Exception {
        HandshakeFrame cpp = HandshakeFrame.read(
                new ByteArrayInputStream(golden("active/hs-metadata-empty-body.rep")), 1 << 20);
        byte[] ours = exchange(engine.getRpcPort(), golden("active/hs-metadata-empty-body.req"));
        HandshakeFrame f = HandshakeFrame.read(new ByteArrayInputStream(ours), 1 << 20);
        String shape = "\\{\"buffers\":\\[\\{\"addr\":\\d+,\"length\":\\d+,\"name\":\"[^\"]+\"}],\"name\":\"[^\"]+\","
                + "\"protocol\":\"tcp\",\"tcp_data_port\":\\d+,\"tcp_proto_version\":2,"
                + "\"timestamp\":\"\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{6}\"}\n";
        assertTrue(cpp.json().matches(shape), cpp.json());
        assertTrue(f.json().matches(shape), f.json());
    }

    /** Rewrites every header address inside the C++ buffer to the same offset of ours (near the end: from the end). */
    private byte[] remap(byte[] stream) {
        ByteBuffer b = ByteBuffer.wrap(stream.clone()).order(ByteOrder.LITTLE_ENDIAN);
        int p = 0;
        while (p + TcpWire.HEADER_BYTES <= stream.length) {
            long size = b.getLong(p);
            long addr = b.getLong(p + 8);
            int op = b.get(p + 16) & 0x7f;
            if (addr - CPP_BASE >= 0 && addr - CPP_BASE < CPP_LEN) {
                long off = addr - CPP_BASE;
                long mapped = off < CPP_LEN / 2 ? buf.address() + off : buf.address() + LEN - (CPP_LEN - off);
                b.putLong(p + 8, mapped);
            }
            p += TcpWire.HEADER_BYTES + (op == TcpWire.OP_WRITE ? (int) size : 0);
        }
        return b.array();
    }

    @Test
    void dataPortAnswersCppRequestsWithTheCppBytes() throws IOException {
        buf.segment().fill((byte) 0);
        for (String name : new String[] {"active/data-v2-write-ok-then-read", "active/data-v2-zero-size",
            "active/data-v2-read-rejected", "active/data-v1-read-rejected", "active/data-v1-write-then-read",
            "active/data-v2-read-spanning-end", "passive/v2-read-oneshot", "passive/v1-read-oneshot",
            "passive/v2-write-lane"}) {
            if (name.endsWith("data-v1-write-then-read")) {
                assertEquals("mooncake", new String(buf.segment().asSlice(0, 8).toArray(ValueLayout.JAVA_BYTE),
                        StandardCharsets.US_ASCII), "state left by the previous request, as on the C++ target");
            }
            if (name.startsWith("passive/")) {
                buf.segment().fill((byte) 0); // the bench never fills its buffers
            }
            byte[] req = remap(golden(name + ".req"));
            assertArrayEquals(golden(name + ".rep"), exchange(TcpTransport.in(engine).dataPort(), req), name);
        }
    }

    @Test
    void headersOfTheCppInitiatorDecodeAndReEncodeIdentically() {
        byte[] lane = golden("passive/v2-write-lane.req");
        ByteBuffer b = ByteBuffer.wrap(lane).order(ByteOrder.LITTLE_ENDIAN);
        for (int p = 0; p < lane.length; p += TcpWire.HEADER_BYTES + 64) {
            byte[] header = java.util.Arrays.copyOfRange(lane, p, p + TcpWire.HEADER_BYTES);
            assertArrayEquals(header, TcpWire.header(b.getLong(p), b.getLong(p + 8), b.get(p + 16) & 0xff));
            assertEquals(0x81, b.get(p + 16) & 0xff);
        }
        byte[] acks = golden("passive/v2-write-lane.rep");
        for (int p = 0; p < acks.length; p += 8) {
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), java.util.Arrays.copyOfRange(acks, p, p + 8));
        }
    }
}
