package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The engine's handshake port: replies per type, and bad input closes one connection only. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class HandshakeRobustnessTest {

    private CoreEngine engine;
    private HandshakeClient client;
    private PeerAddress addr;

    @BeforeEach
    void start() {
        engine = TcpEngines.started();
        client = new HandshakeClient(HandshakeConfig.ephemeral(TcpEngines.LOOPBACK));
        addr = new PeerAddress("127.0.0.1", engine.getRpcPort());
    }

    @AfterEach
    void stop() {
        engine.close();
    }

    /** Sends raw bytes, half-closes, and returns everything the server sent before closing. */
    private byte[] exchange(byte[] request) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", engine.getRpcPort()), 5000);
            s.setSoTimeout(10_000);
            s.getOutputStream().write(request);
            s.shutdownOutput();
            return s.getInputStream().readAllBytes();
        }
    }

    private static byte[] hex(String s) {
        return HexFormat.of().parseHex(s.replace(" ", ""));
    }

    @Test
    void probeIsAnsweredWithSuccess() throws IOException {
        byte[] reply = exchange(hex("0400000000000000 03 7B7D0A"));
        ByteBuffer expected = ByteBuffer.allocate(30).order(ByteOrder.LITTLE_ENDIAN).put(hex("1600000000000000 03"))
                .put("{\"status\":\"success\"}\n".getBytes(StandardCharsets.UTF_8));
        assertArrayEquals(expected.array(), reply);
        assertEquals(0, engine.sendProbe(engine.getLocalSegmentName()));
    }

    @Test
    void metadataReplyIsTheLiveDescriptor() {
        try (HostMemoryAllocator a = new HostMemoryAllocator()) {
            HostMemoryStorage m = a.allocate(1 << 20);
            assertEquals(0, engine.registerMemory(m.address(), 1 << 20, "cpu:0"));
            HandshakeFrame reply = client.send(addr, new HandshakeFrame(HandshakeFrame.METADATA, "{}\n"));
            assertEquals(HandshakeFrame.METADATA, reply.type());
            String expectedPrefix = "{\"buffers\":[{\"addr\":" + m.address() + ",\"length\":1048576,\"name\":\""
                    + engine.getLocalSegmentName() + "\"}],\"name\":\"" + engine.getLocalSegmentName()
                    + "\",\"protocol\":\"tcp\",\"tcp_data_port\":" + TcpTransport.in(engine).dataPort()
                    + ",\"tcp_proto_version\":2,\"timestamp\":\"";
            assertTrue(reply.json().startsWith(expectedPrefix), reply.json());
            assertTrue(reply.json().endsWith("\"}\n"), reply.json());
            SegmentDescriptor d = client.fetchDescriptor(addr, "{}\n");
            assertEquals(TcpTransport.in(engine).dataPort(), d.tcpDataPort());
            assertEquals(0, engine.unregisterMemory(m.address()));
        }
    }

    @Test
    void connectionRequestGetsTheEmptyHandshakeDescOfATcpNode() throws IOException {
        String empty = "{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"\",\"payload\":\"\","
                + "\"peer_nic_path\":\"\",\"qp_num\":[],\"reply_msg\":\"\"}\n";
        HandshakeFrame reply = client.send(addr, new HandshakeFrame(HandshakeFrame.CONNECTION, "{}\n"));
        assertEquals(HandshakeFrame.CONNECTION, reply.type());
        assertEquals(empty, reply.json());
        byte[] legacyReply = exchange(new HandshakeFrame(HandshakeFrame.LEGACY, "{}\n").encode());
        assertArrayEquals(new HandshakeFrame(HandshakeFrame.LEGACY, empty).encode(), legacyReply,
                "a legacy request is answered without type byte");
    }

    @Test
    void notifyIsQueuedAndAcknowledged() {
        assertEquals(0, engine.sendNotify(engine.getLocalSegmentName(), "peer-a", "hello"));
        assertEquals(java.util.List.of(new CoreEngine.Notify("peer-a", "hello")), engine.getNotifies());
    }

    @Test
    void malformedInputClosesWithoutReplyAndServerKeepsServing() throws IOException {
        byte[][] bad = {
            hex("6400000000000000 01 7B7D"),                 // truncated body
            hex("0000000001000000 01"),                       // absurd length (2^32)
            hex("FFFFFFFFFFFFFFFF 01"),                       // absurd length (2^64-1)
            hex("0000000000000000"),                          // zero length
            hex("0400"),                                      // truncated length prefix
            hex("0400000000000000 01 7B7B0A"),                // invalid JSON
            hex("0400000000000000 80 7B7D0A"),                // type byte 0x80
            hex("0400000000000000 FF 7B7D0A"),                // type byte 0xFF
        };
        long before = engine.counters().rejectedHandshakes();
        for (byte[] b : bad) {
            assertEquals(0, exchange(b).length, HexFormat.of().formatHex(b));
            assertEquals(0, engine.sendProbe(engine.getLocalSegmentName()), "still serving");
        }
        assertEquals(before + bad.length, engine.counters().rejectedHandshakes(), "each dropped connection counted");
    }

    @Test
    void aSilentClientDoesNotBlockOtherHandshakes() throws IOException {
        try (Socket idle = new Socket()) {
            idle.connect(new InetSocketAddress("127.0.0.1", engine.getRpcPort()), 5000);
            idle.getOutputStream().write(hex("0400")); // and then nothing
            for (int i = 0; i < 5; i++) {
                assertEquals(0, engine.sendProbe(engine.getLocalSegmentName()));
            }
            idle.setSoTimeout(15_000);
            InputStream in = idle.getInputStream();
            ByteArrayOutputStream got = new ByteArrayOutputStream();
            in.transferTo(got);
            assertEquals(0, got.size(), "closed after the server's 5 s read timeout, without reply");
        }
    }
}
