package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.blocks;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.metadataFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.send.KvSender;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.testlog.LogCapture;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * A pull whose destination is P's own engine (by its segment name, or by a name that resolves to P's
 * address) is refused with an ERROR answer and counted: P never writes a request's blocks into its own
 * memory, where they would overwrite other requests' cache. vLLM trusts D's destination.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SelfAimedPullTest {

    /** P's {@code transferId} is ready (block 7) and its block 2 holds its own data: a self-aimed pull must not copy 7 onto 2. */
    private static void assertRefused(String host, PdTestbed bed) {
        assertRefused(host, bed, true);
    }

    /** {@code onArrival}: refused with ERROR when the pull arrives; else when its write would start ({@code err_reqs}). */
    private static void assertRefused(String host, PdTestbed bed, boolean onArrival) {
        assertRefused(host, bed, onArrival, port -> port);
    }

    /** As above, the pull naming {@code portOf.applyAsInt(P's RPC port)}. */
    private static void assertRefused(String host, PdTestbed bed, boolean onArrival,
            java.util.function.IntUnaryOperator portOf) {
        assertRefused(host, bed, onArrival, portOf, () -> "");
    }

    /** As above; {@code more} adds to a receive timeout's message (the forwarder's connections). */
    private static void assertRefused(String host, PdTestbed bed, boolean onArrival,
            java.util.function.IntUnaryOperator portOf, java.util.function.Supplier<String> more) {
        try (LogCapture logs = LogCapture.start(KvSender.class); bed) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> { });
            p.fill(2, 7);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 7));
            MooncakeXferMetadata own = metadataFor(p, Map.of("dz", blocks("X", 2)));
            MooncakeXferMetadata aimed = new MooncakeXferMetadata(host, portOf.applyAsInt(own.remotePort()),
                    own.remoteTpSize(),
                    own.remoteTpRank(), own.reqBlocks(), own.kvCachesBaseAddr(), own.blockLens(), own.kvBlockLens(),
                    own.registeredLayerNames(), own.registeredLayerIndices(), own.registeredGroupIndices(),
                    own.remotePpSize());
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)
                    .explainTimeoutWith(() -> PdTestbed.sideChannelState(p) + more.get())) { // + the forwarder
                dealer.send(MooncakeXferMetadataCodec.encode(aimed));
                MooncakeXferResponse r = dealer.recv();
                if (onArrival) {
                    assertEquals(MooncakeXferResponseStatus.ERROR, r.status(), "a pull aimed at " + host);
                } else {
                    assertEquals(MooncakeXferResponseStatus.FINISH, r.status(), "the pull's final answer");
                    assertEquals(java.util.List.of("dz"), r.errReqs(), "its request failed, not written");
                }
                assertTrue(r.errMsg().contains("own engine"), r.errMsg());
            }
            PdTestbed.assertSameTpCopy(p, 2, p, 2); // P's block 2 still holds its own bytes
            assertEquals(1, p.worker.diagnostics().selfAimedRefusals());
            assertEquals(1, p.worker.counters().selfAimedRefusals(), "public, for monitoring");
            if (onArrival) {
                assertEquals(1, p.worker.diagnostics().errorReplies());
                logs.assertLogged(Level.ERROR, "aimed at this P worker's own engine");
            } else {
                logs.assertLogged(Level.WARN, "own engine");
            }
        }
    }

    @Test
    void aPullNamingPsOwnSegmentIsRefused() {
        assertRefused("127.0.0.1", new PdTestbed());
    }

    @Test
    void aPullNamingAHostThatResolvesToPIsRefused() {
        // the TCP engine resolves the name: without the check, P's own data port takes the write
        assertRefused("localhost", new PdTestbed().engines(() -> TransferEngines.create("tcp")));
    }

    @Test
    void aPullNamingThisMachinesHostnameIsRefusedBeforeItsWrite() throws Exception {
        // not a name the sender loop knows without a lookup: resolved on the transfer thread
        InetAddress local = InetAddress.getLocalHost();
        Assumptions.assumeTrue(NetworkInterface.getByInetAddress(local) != null || local.isLoopbackAddress(),
                "this machine's hostname resolves to one of its own addresses");
        assertRefused(local.getHostName(), new PdTestbed().engines(() -> TransferEngines.create("tcp")), false);
    }

    @Test
    void aPullThroughAPortForwardedToPsOwnEngineIsRefusedByTheEnginesIdentity() throws Exception {
        // another port that leads to P's RPC port (a NAT or port-forward): the names say "someone else",
        // the descriptor fetched through it is P's own
        try (TcpForwarder fwd = new TcpForwarder()) {
            assertRefused("127.0.0.1", new PdTestbed().engines(() -> TransferEngines.create("tcp")), false,
                    fwd::forwardTo, () -> "; the forwarder's connections: " + fwd.connections());
            assertTrue(fwd.connections() > 0, "the descriptor was fetched through the forwarder");
        }
    }

    /**
     * A destination found to be P itself only when the engine connects: its first descriptor names another
     * engine (whose data port refuses), and after that failed write the same handshake server answers with
     * P's own data port. The refresh that follows the failure finds P: the write is refused, counted as a
     * self-aimed refusal (not as a failed transfer) and D's answer says why.
     */
    @Test
    void aWriteRefusedAsPsOwnEngineWhenTheEngineConnectsIsCountedAsASelfAimedRefusal() throws Exception {
        AtomicReference<SegmentDescriptor> answer = new AtomicReference<>();
        try (LogCapture logs = LogCapture.start(KvSender.class);
                PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"));
                HandshakeServer forger = HandshakeServer.start(HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()),
                        (type, request) -> type == HandshakeFrame.METADATA ? answer.get().toJson() : "{}\n")) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> { });
            p.fill(2, 3, 7, 8);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 7));
            p.step(announce("p2", "Y"));
            p.step(finished("p2", "Y", 8));
            SegmentDescriptor own = ((CoreEngine) p.transferEngine).localDescriptor();
            String name = "127.0.0.1:" + forger.port();
            int deadPort;
            try (ServerSocket gone = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                deadPort = gone.getLocalPort(); // closed below: connections to it are refused
            }
            answer.set(renamed(own, name, deadPort));
            MooncakeXferResponse first = pull(p, forger.port(), "dx", "X", 2);
            assertEquals(java.util.List.of("dx"), first.errReqs(), "the unreachable destination's write failed");
            assertEquals(0, p.worker.counters().selfAimedRefusals(), "an unreachable D is not P itself");

            answer.set(renamed(own, name, own.tcpDataPort()));
            MooncakeXferResponse second = pull(p, forger.port(), "dy", "Y", 3);
            assertEquals(MooncakeXferResponseStatus.FINISH, second.status());
            assertEquals(java.util.List.of("dy"), second.errReqs(), "its request failed, not written");
            assertTrue(second.errMsg().contains("own engine"), second.errMsg());
            assertEquals(1, p.worker.counters().selfAimedRefusals(), "counted where the other refusals are");
            assertEquals(1, p.worker.diagnostics().selfAimedRefusals());
            logs.assertLogged(Level.WARN, "own engine");
            PdTestbed.assertSameTpCopy(p, 2, p, 2);
            PdTestbed.assertSameTpCopy(p, 3, p, 3); // P's blocks still hold their own bytes
        }
    }

    /**
     * A D whose descriptor is another engine's by every name, port and identity it states, but whose data
     * port is a forwarder to P's own data port (a NAT or port-forward): P's own data server recognises P's
     * requests (their header carries P's engine tag) and refuses them; nothing is written, the refusal is
     * counted as self-aimed and D's answer says why.
     */
    @Test
    void aWriteThroughAForwarderToPsOwnDataPortIsRefusedByPsDataServer() throws Exception {
        AtomicReference<SegmentDescriptor> answer = new AtomicReference<>();
        try (LogCapture logs = LogCapture.start();
                TcpForwarder fwd = new TcpForwarder();
                PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"));
                HandshakeServer forger = HandshakeServer.start(HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()),
                        (type, request) -> type == HandshakeFrame.METADATA ? answer.get().toJson() : "{}\n")) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> { });
            p.fill(2, 7);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 7));
            SegmentDescriptor own = ((CoreEngine) p.transferEngine).localDescriptor();
            answer.set(renamed(own, "127.0.0.1:" + forger.port(), fwd.forwardTo(own.tcpDataPort())));
            MooncakeXferResponse r = pull(p, forger.port(), "dz", "X", 2);
            assertTrue(fwd.connections() > 0, "the write went through the forwarder");
            assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
            assertEquals(java.util.List.of("dz"), r.errReqs(), "its request failed, not written");
            assertTrue(r.errMsg().contains("own engine"), r.errMsg());
            PdTestbed.assertSameTpCopy(p, 2, p, 2); // P's block 2 still holds its own bytes
            assertEquals(1, p.worker.counters().selfAimedRefusals());
            logs.assertLogged(Level.WARN, "from this engine itself");
            logs.assertLogged(Level.WARN, "own engine");
        }
    }

    /** {@code own} under another name and data port (what a forging handshake server answers). */
    private static SegmentDescriptor renamed(SegmentDescriptor own, String name, int dataPort) {
        return new SegmentDescriptor(name, own.protocol(), dataPort, own.tcpProtoVersion(), own.timestamp(),
                own.rdmaServerName(), own.buffers(), own.devices(), own.priorityMatrix(), own.extensions());
    }

    /** Sends P a pull of {@code transferId} into its own block {@code dBlock}, aimed at {@code 127.0.0.1:port}; its answer. */
    private static MooncakeXferResponse pull(PdTestbed.Node p, int port, String dReq, String transferId, int dBlock) {
        MooncakeXferMetadata own = metadataFor(p, Map.of(dReq, blocks(transferId, dBlock)));
        MooncakeXferMetadata aimed = new MooncakeXferMetadata("127.0.0.1", port, own.remoteTpSize(),
                own.remoteTpRank(), own.reqBlocks(), own.kvCachesBaseAddr(), own.blockLens(), own.kvBlockLens(),
                own.registeredLayerNames(), own.registeredLayerIndices(), own.registeredGroupIndices(),
                own.remotePpSize());
        try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
            dealer.send(MooncakeXferMetadataCodec.encode(aimed));
            return dealer.recv();
        }
    }

    @Test
    void aPullNamingTheWildcardAddressIsRefused() {
        assertRefused("0.0.0.0", new PdTestbed().engines(() -> TransferEngines.create("tcp")));
    }

    @Test
    void aPullNamingIpv6LoopbackIsRefused() {
        assertRefused("::1", new PdTestbed().engines(() -> TransferEngines.create("tcp")));
    }
}
