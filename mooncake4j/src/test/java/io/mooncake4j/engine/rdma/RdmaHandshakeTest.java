package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandShakeDesc;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.rdma.RdmaProvider.CompletionQueue;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.engine.rdma.RdmaProvider.QueuePair;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The RDMA handshake as Mooncake encodes it: golden bytes for the RDMA segment descriptor and
 * {@code HandShakeDesc} (spec §2.6, §2.7), and the engine's passive side driven by a peer that
 * behaves like the C++ active side (§5.4) over the emulated fabric.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaHandshakeTest {

    private static final String GID = "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02";

    @Test
    void rdmaDescriptorEncodesAsInTheSpecExample() {
        SegmentDescriptor d = new SegmentDescriptor("10.0.0.2:15321", "rdma", 0, 1, "2026-08-22 10:15:30.123456", null,
                List.of(new SegmentDescriptor.Buffer("cpu:0", 140234567892992L, 1073741824L, List.of(2101L),
                        List.of(2101L))),
                List.of(new SegmentDescriptor.Device("mlx5_0", 0, GID)),
                Map.of("cpu:0", List.of(List.of("mlx5_0"), List.of())));
        String expected = "{\"buffers\":[{\"addr\":140234567892992,\"length\":1073741824,\"lkey\":[2101],"
                + "\"name\":\"cpu:0\",\"rkey\":[2101]}],\"devices\":[{\"gid\":\"" + GID + "\",\"lid\":0,"
                + "\"name\":\"mlx5_0\"}],\"name\":\"10.0.0.2:15321\",\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[]]},"
                + "\"protocol\":\"rdma\",\"tcp_data_port\":0,\"tcp_proto_version\":1,"
                + "\"timestamp\":\"2026-08-22 10:15:30.123456\"}\n";
        assertEquals(expected, d.toJson());
        PeerSegment p = new PeerSegment(1, d);
        assertEquals("10.0.0.2:15321@mlx5_0", p.nicPath[0]);
        assertEquals(0, p.bufferAt(140234567892992L + 4096));
        assertEquals(65536, p.coveredFrom(140234567892992L + 4096, 65536));
        assertEquals(2101, p.rkey[0][0]);
    }

    @Test
    void emptyConnectionReplyIsByteForByteWhatATcpNodeSends() {
        assertEquals("{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"\",\"payload\":\"\",\"peer_nic_path\":\"\","
                + "\"qp_num\":[],\"reply_msg\":\"\"}\n", HandShakeDesc.empty().toJson());
    }

    @Test
    void activeConnectionRequestHasMooncakesKeysAndFrame() {
        HandShakeDesc req = new HandShakeDesc("10.0.0.1:15123@mlx5_0", "10.0.0.2:15321@mlx5_0", GID, 0,
                List.of(17L, 4294967295L), Boolean.FALSE, "", "");
        String json = "{\"local_gid\":\"" + GID + "\",\"local_lid\":0,\"local_nic_path\":\"10.0.0.1:15123@mlx5_0\","
                + "\"payload\":\"\",\"peer_nic_path\":\"10.0.0.2:15321@mlx5_0\",\"qp_num\":[17,4294967295],"
                + "\"ready_ack\":false,\"reply_msg\":\"\"}\n";
        assertEquals(json, req.toJson());
        byte[] frame = new HandshakeFrame(HandshakeFrame.CONNECTION, req.toJson()).encode();
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        assertEquals(body.length + 1, frame[0] & 0xff, "u64 LE length counts the type byte");
        assertArrayEquals(new byte[7], Arrays.copyOfRange(frame, 1, 8));
        assertEquals(0, frame[8], "type 0 = Connection");
        assertArrayEquals(body, Arrays.copyOfRange(frame, 9, frame.length));
        assertEquals(req, HandShakeDesc.parse(json));
        assertTrue(req.withReadyAck(Boolean.TRUE).toJson().contains("\"ready_ack\":true,"));
    }

    @Test
    void decodingIsAsLenientAsMooncakes() {
        HandShakeDesc d = HandShakeDesc.parse("{\"local_gid\":5,\"local_lid\":\"x\",\"qp_num\":[1],\"extra\":1}");
        assertEquals("", d.localGid());
        assertEquals(0, d.localLid());
        assertNull(d.readyAck(), "no key: the peer does not support the ready-ACK");
        assertEquals(Boolean.FALSE, HandShakeDesc.parse("{\"ready_ack\":\"yes\"}").readyAck(), "key present");
        assertThrows(IllegalArgumentException.class, () -> HandShakeDesc.parse("{\"qp_num\":[-1]}"));
        assertEquals("10.0.0.1:15123", HandShakeDesc.serverOf("10.0.0.1:15123@mlx5_0"));
        assertEquals("mlx5_0", HandShakeDesc.deviceOf("10.0.0.1:15123@mlx5_0"));
        assertEquals("[::1]:15123", HandShakeDesc.serverOf("[::1]:15123@mlx5_0"));
    }

    @Test
    void engineServesAnRdmaDescriptorWithKeysPerDevice() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine e = EmulatedEngines.started(fabric, "emu0,emu1")) {
            HostMemoryStorage a = alloc.allocate(8192);
            HostMemoryStorage b = alloc.allocate(4096);
            assertEquals(0, e.registerMemory(b.address(), 4096, "*"));
            assertEquals(0, e.registerMemory(a.address(), 8192, "cpu:0"));
            SegmentDescriptor d = client().fetchDescriptor(PeerAddress.parse(e.getLocalSegmentName(), 0), "{}\n");
            assertEquals("rdma", d.protocol());
            assertEquals(e.getLocalSegmentName(), d.name());
            assertEquals(0, d.tcpDataPort());
            assertEquals(1, d.tcpProtoVersion());
            assertEquals(List.of("emu0", "emu1"), d.devices().stream().map(SegmentDescriptor.Device::name).toList());
            for (SegmentDescriptor.Device dev : d.devices()) {
                assertTrue(dev.gid().matches("([0-9a-f]{2}:){15}[0-9a-f]{2}"), dev.gid());
            }
            assertEquals(2, d.buffers().size());
            assertEquals(b.address(), d.buffers().get(0).addr(), "buffers in registration order");
            assertEquals(b.address(), e.getFirstBufferAddress(e.getLocalSegmentName()));
            for (SegmentDescriptor.Buffer buf : d.buffers()) {
                assertEquals(2, buf.rkey().size(), "one rkey per device, in devices[] order");
                assertEquals(2, buf.lkey().size());
            }
            assertEquals("cpu:0", d.buffers().stream().filter(x -> x.addr() == a.address()).findFirst().orElseThrow()
                    .name());
            assertEquals(List.of(List.of("emu0", "emu1"), List.of()), d.priorityMatrix().get("*"));
            assertTrue(d.priorityMatrix().containsKey("cpu:0"), d.priorityMatrix().toString());
        }
    }

    /** A peer doing what the C++ active side does: Connection, QPs to RTS, ready-ACK, then RDMA WRITE. */
    @Test
    void aPeerFollowingMooncakesActiveSideCanWriteIntoRegisteredMemory() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        RdmaSettings s = RdmaSettings.defaults();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine engine = EmulatedEngines.started(fabric, "emu0");
                Device peer = fabric.open("emu1")) {
            HostMemoryStorage target = alloc.allocate(4096);
            HostMemoryStorage source = alloc.allocate(4096);
            source.segment().fill((byte) 0x42);
            assertEquals(0, engine.registerMemory(target.address(), 4096, "cpu:0"));
            SegmentDescriptor d = client().fetchDescriptor(PeerAddress.parse(engine.getLocalSegmentName(), 0), "{}\n");

            CompletionQueue cq = peer.createCq(16);
            QueuePair q0 = peer.createRcQp(cq, s.qpCapabilities());
            QueuePair q1 = peer.createRcQp(cq, s.qpCapabilities());
            MemoryRegion mr = peer.register(source.address(), 4096, IbvPd.ACCESS_LOCAL_WRITE);
            String ownPath = "127.0.0.1:1@emu1";
            String enginePath = d.name() + "@" + d.devices().get(0).name();
            List<Long> ownQps = List.of((long) q0.qpNum(), (long) q1.qpNum());
            HandShakeDesc req = new HandShakeDesc(ownPath, enginePath, peer.gid(1, 1).toString(), 0, ownQps,
                    Boolean.FALSE, "", "");
            HandShakeDesc reply = connection(engine, req);
            assertEquals("", reply.replyMsg());
            assertEquals(enginePath, reply.localNicPath());
            assertEquals(ownPath, reply.peerNicPath());
            assertEquals(d.devices().get(0).gid(), reply.localGid());
            assertEquals(2, reply.qpNums().size());
            assertEquals(Boolean.FALSE, reply.readyAck(), "the engine advertises the ready-ACK, as C++ does");

            assertEquals(reply, connection(engine, req), "a repeated request gets the same QPs");
            QpBringUp.connect(q0, new QpBringUp.Peer(Gid.parse(reply.localGid()), 0, (int) (long) reply.qpNums().get(0)),
                    5, 1, s);
            QpBringUp.connect(q1, new QpBringUp.Peer(Gid.parse(reply.localGid()), 0, (int) (long) reply.qpNums().get(1)),
                    5, 1, s);
            assertEquals(HandShakeDesc.empty(), connection(engine, req.withReadyAck(Boolean.TRUE)));

            try (SendWorkRequests wrs = new SendWorkRequests(1); WorkCompletions wc = new WorkCompletions(4)) {
                wrs.set(0, 99, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, source.address(),
                        4096, mr.lkey(), target.address(), (int) (long) d.buffers().get(0).rkey().get(0));
                wrs.chain(0, 1);
                assertEquals(0, q1.postSend(wrs, 0));
                assertEquals(1, cq.poll(wc));
                assertEquals(WorkCompletions.SUCCESS, wc.status(0));
                assertEquals(99, wc.wrId(0));
            }
            for (long i = 0; i < 4096; i++) {
                assertEquals((byte) 0x42, target.segment().get(ValueLayout.JAVA_BYTE, i));
            }

            HandShakeDesc restarted = new HandShakeDesc(ownPath, enginePath, peer.gid(1, 1).toString(), 0,
                    List.of(1000L, 1001L), null, "", "");
            HandShakeDesc again = connection(engine, restarted);
            assertEquals("", again.replyMsg(), "a restarted peer (new QPs) gets a fresh endpoint");
            assertTrue(again.qpNums().stream().noneMatch(reply.qpNums()::contains), "QP numbers are never reused");
        }
    }

    @Test
    void inconsistentConnectionRequestsAreRejectedInReplyMsg() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0");
        try (CoreEngine engine = EmulatedEngines.started(fabric, "emu0")) {
            String me = engine.getLocalSegmentName();
            Gid g = Gid.parse(GID);
            HandShakeDesc unknownNic = connection(engine, new HandShakeDesc("peer:1@x", me + "@mlx5_9", g.toString(), 0,
                    List.of(1L, 2L), Boolean.FALSE, "", ""));
            assertTrue(unknownNic.replyMsg().startsWith("Local RDMA context not found"), unknownNic.replyMsg());
            HandShakeDesc wrongServer = connection(engine, new HandShakeDesc("peer:1@x", "elsewhere:9@emu0",
                    g.toString(), 0, List.of(1L, 2L), Boolean.FALSE, "", ""));
            assertTrue(wrongServer.replyMsg().startsWith("peer nic path inconsistency"), wrongServer.replyMsg());
            HandShakeDesc qpCount = connection(engine, new HandShakeDesc("peer:1@x", me + "@emu0", g.toString(), 0,
                    List.of(1L), Boolean.FALSE, "", ""));
            assertTrue(qpCount.replyMsg().contains("MC_NUM_QP_PER_EP"), qpCount.replyMsg());
            HandShakeDesc strayAck = connection(engine, new HandShakeDesc("peer:2@x", me + "@emu0", g.toString(), 0,
                    List.of(1L, 2L), Boolean.TRUE, "", ""));
            assertTrue(!strayAck.replyMsg().isEmpty(), "ready-ACK for an unknown connection");
        }
    }

    private static HandshakeClient client() {
        return new HandshakeClient(HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
    }

    private static HandShakeDesc connection(CoreEngine engine, HandShakeDesc req) {
        HandshakeFrame reply = client().send(PeerAddress.parse(engine.getLocalSegmentName(), 0),
                new HandshakeFrame(HandshakeFrame.CONNECTION, req.toJson()));
        assertEquals(HandshakeFrame.CONNECTION, reply.type());
        return HandShakeDesc.parse(reply.json());
    }
}
