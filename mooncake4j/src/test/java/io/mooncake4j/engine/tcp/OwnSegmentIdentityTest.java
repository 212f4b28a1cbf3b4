package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.event.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link CoreEngine#isOwnSegment}: a segment is the engine's own by what its descriptor says (name,
 * data endpoint on an address of this host), whatever name or handshake server led there; a peer's
 * handshake server that answers with a forged descriptor naming our data port is us, under any local
 * name ({@code ::1}, {@code 0.0.0.0}, another loopback or interface address).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OwnSegmentIdentityTest {

    private final List<AutoCloseable> closers = new ArrayList<>();

    @AfterEach
    void stop() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
    }

    private CoreEngine engine() {
        CoreEngine e = TcpEngines.started(TcpEngines.config());
        closers.add(e);
        return e;
    }

    /** A handshake server that answers every descriptor request with {@code forged}; its segment name. */
    private String forging(SegmentDescriptor forged) throws Exception {
        return forging(new AtomicReference<>(forged));
    }

    /** A handshake server that answers each descriptor request with what {@code forged} holds then. */
    private String forging(AtomicReference<SegmentDescriptor> forged) throws Exception {
        HandshakeServer s = HandshakeServer.start(HandshakeConfig.ephemeral(TcpEngines.LOOPBACK),
                (type, request) -> type == HandshakeFrame.METADATA ? forged.get().toJson() : "{}\n");
        closers.add(s);
        return "127.0.0.1:" + s.port();
    }

    private static SegmentDescriptor renamed(SegmentDescriptor d, String name, int dataPort) {
        return new SegmentDescriptor(name, d.protocol(), dataPort, d.tcpProtoVersion(), d.timestamp(),
                d.rdmaServerName(), d.buffers(), d.devices(), d.priorityMatrix(), d.extensions());
    }

    @Test
    void aForgedDescriptorNamingOurDataPortOnAnyLocalAddressIsOurOwnSegment() throws Exception {
        CoreEngine p = engine();
        CoreEngine other = engine();
        SegmentDescriptor own = p.localDescriptor();
        int dataPort = own.tcpDataPort();
        assertTrue(dataPort > 0);
        List<String> localHosts = new ArrayList<>(List.of("127.0.0.2", "[::1]", "0.0.0.0", "localhost"));
        for (NetworkInterface ni : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress a : Collections.list(ni.getInetAddresses())) {
                if (a instanceof Inet4Address && !a.isLoopbackAddress()) {
                    localHosts.add(a.getHostAddress()); // another local address of this machine
                }
            }
        }
        for (String host : localHosts) {
            String name = forging(renamed(own, host + ":40000", dataPort));
            assertTrue(p.isOwnSegment(name), "a descriptor naming " + host + " and our data port is ours");
            assertEquals(0, p.openSegment(name), "and it is segment 0 for transfers too");
            assertFalse(other.isOwnSegment(name), "not another engine's own");
        }
        // our data port on a host that is not this machine, or another port here: not us
        assertFalse(p.isOwnSegment(forging(renamed(own, "192.0.2.1:40000", dataPort))));
        assertFalse(p.isOwnSegment(forging(renamed(own, "127.0.0.1:40000", other.localDescriptor().tcpDataPort()))));
        // our real names and the wildcard address are ours; another engine is not
        assertTrue(p.isOwnSegment(p.getLocalSegmentName()));
        assertTrue(p.isOwnSegment("0.0.0.0:" + p.getRpcPort()));
        assertFalse(p.isOwnSegment(other.getLocalSegmentName()));
    }

    @Test
    void aPeerWhoseDescriptorTurnsIntoOursAfterTheFirstOpenIsRefusedOnRefreshAndNothingIsWritten() throws Exception {
        CoreEngine p = engine();
        HostMemoryAllocator alloc = new HostMemoryAllocator();
        closers.add(alloc);
        long len = 4096;
        HostMemoryStorage src = alloc.allocate(len);
        HostMemoryStorage dst = alloc.allocate(len);
        for (long i = 0; i < len; i++) {
            src.segment().set(ValueLayout.JAVA_BYTE, i, (byte) 0x5a);
        }
        assertEquals(0, p.registerMemory(src.address(), len, "cpu:0"));
        assertEquals(0, p.registerMemory(dst.address(), len, "cpu:0"));
        SegmentDescriptor own = p.localDescriptor();
        int deadPort;
        try (ServerSocket gone = new ServerSocket(0, 1, TcpEngines.LOOPBACK)) {
            deadPort = gone.getLocalPort(); // closed below: connections to it are refused
        }
        AtomicReference<SegmentDescriptor> answer = new AtomicReference<>();
        String name = forging(answer);
        // first a peer whose data port refuses: opened as a peer, not us; its transfer fails
        answer.set(renamed(own, name, deadPort));
        long id = p.openSegment(name);
        assertTrue(id > 0, "a peer segment, not ours");
        long[] s = {src.address()};
        long[] d = {dst.address()};
        long[] n = {len};
        assertTrue(p.batchTransferSyncWrite(name, s, d, n) != 0, "the dead peer's write fails");
        assertFalse(p.refusedAsOwnSegment(name), "an unreachable peer is not this engine");
        // then the same name's handshake answers with our own data port: the refresh that follows the
        // failure must not make it a peer that writes into our own memory
        answer.set(renamed(own, name, own.tcpDataPort()));
        try (LogCapture log = LogCapture.start()) {
            assertTrue(p.batchTransferSyncWrite(name, s, d, n) != 0, "refused, not written");
            log.assertLogged(Level.WARN, "refreshed to this engine's own segment");
        }
        assertTrue(p.refusedAsOwnSegment(name), "the caller can tell this failure from another");
        assertFalse(p.refusedAsOwnSegment("127.0.0.1:1"), "a name never opened");
        // the name leads to another engine again: the next refresh clears the verdict
        answer.set(renamed(own, name, deadPort));
        assertTrue(p.batchTransferSyncWrite(name, s, d, n) != 0, "the dead peer's write fails again");
        assertFalse(p.refusedAsOwnSegment(name), "found another engine there");
        for (long i = 0; i < len; i++) {
            assertEquals(0, dst.segment().get(ValueLayout.JAVA_BYTE, i), "byte " + i + " of our own memory written");
        }
    }

    @Test
    void aDataAddressResolvedAtConnectTimeIsOursOnlyOnOurDataPortOnAnAddressOfThisHost() throws Exception {
        int port = 40123;
        List<String> local = new ArrayList<>(List.of("127.0.0.1", "127.0.0.2", "::1", "0.0.0.0", "localhost"));
        for (NetworkInterface ni : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress a : Collections.list(ni.getInetAddresses())) {
                if (a instanceof Inet4Address) {
                    local.add(a.getHostAddress());
                }
            }
        }
        for (String host : local) {
            assertTrue(Peer.isOwnDataEndpoint(new InetSocketAddress(host, port), port), host);
            assertFalse(Peer.isOwnDataEndpoint(new InetSocketAddress(host, port + 1), port), host + ", another port");
        }
        assertFalse(Peer.isOwnDataEndpoint(new InetSocketAddress("192.0.2.1", port), port), "not this host");
        assertFalse(Peer.isOwnDataEndpoint(InetSocketAddress.createUnresolved("no-such-host.invalid", port), port),
                "unresolved: the connect fails by itself");
        assertFalse(Peer.isOwnDataEndpoint(new InetSocketAddress("127.0.0.1", port), 0), "no data port yet");
    }
}
