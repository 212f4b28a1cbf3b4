package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * Per-request selection with fallback between the rdma (emulated fabric) and tcp transports of
 * one engine core: rdma when both sides have keys, tcp when rdma cannot bring up a QP.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaFallbackTest {

    private static final long LEN = 1 << 20;

    private EmulatedRdmaProvider fabric;
    private CoreEngine target;
    private CoreEngine initiator;
    private HostMemoryAllocator alloc;
    private HostMemoryStorage local;
    private HostMemoryStorage remote;

    /** The core with rdma over {@code fabric} and tcp on 127.0.0.1, rdma on {@code device}. */
    static CoreEngine rdmaAndTcp(EmulatedRdmaProvider fabric, String device) {
        RdmaEngineConfig cfg = EmulatedEngines.config();
        TcpConfig tcp = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
        CoreEngine e = new EngineBuilder().settings(new EngineSettings(cfg.handshake(), cfg.transferTimeoutMs(), 64, Map.of())).environment(Map.of()).offer(
                new TransportFactory(RdmaTransport.DECLARATION, () -> new RdmaTransport(fabric, cfg, Optional::empty,
                        GpuDirectSupport.cuda())),
                new TransportFactory(TcpTransport.DECLARATION, () -> new TcpTransport(tcp))).build();
        if (e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "rdma", device) != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    @BeforeEach
    void setUp() {
        fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = rdmaAndTcp(fabric, "emu0");
        initiator = rdmaAndTcp(fabric, "emu1");
        alloc = new HostMemoryAllocator();
        local = alloc.allocate(LEN);
        remote = alloc.allocate(LEN);
        assertEquals(0, initiator.registerMemory(local.address(), LEN, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), LEN, "cpu:0"));
        for (long i = 0; i < LEN; i += 8) {
            local.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31 + 7);
        }
    }

    @AfterEach
    void tearDown() {
        initiator.close();
        target.close();
        alloc.close();
    }

    /** {@code LEN} bytes as four descriptors (four slices for the core to route). */
    private int write() {
        long q = LEN / 4;
        long[] src = new long[4];
        long[] dst = new long[4];
        long[] len = new long[4];
        for (int i = 0; i < 4; i++) {
            src[i] = local.address() + i * q;
            dst[i] = remote.address() + i * q;
            len[i] = q;
        }
        return initiator.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len);
    }

    private void assertArrived() {
        assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), remote.segment().toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void bothSidesWithKeysGoOverRdmaAndTheDescriptorStaysMooncakes() {
        assertEquals(List.of("rdma", "tcp"), initiator.transportNames());
        assertEquals("rdma", initiator.protocol());
        var d = target.localDescriptor();
        assertEquals("rdma", d.protocol());
        assertTrue(d.tcpDataPort() > 0, "tcp advertised beside rdma");
        assertEquals(1, d.buffers().get(0).rkey().size(), "one rkey per device");
        long before = fabric.postedRequests();
        assertEquals(0, write());
        assertArrived();
        assertTrue(fabric.postedRequests() - before >= LEN / (64 << 10), "the bytes went as RDMA work requests");
        assertEquals(0, initiator.fallbackSlices());
    }

    @Test
    void aPeerWhoseQpBringUpFailsStillGetsItsBytesOverTcpLoggedOnce() {
        fabric.failTransition(EmulatedRdmaProvider.Transition.RTR, EmulatedRdmaProvider.ETIMEDOUT, 1_000);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(0, write());
            assertArrived();
            assertEquals(4, initiator.fallbackSlices(), "each slice counted");
            long posted = fabric.postedRequests();
            // the peer is now known unreachable over rdma: the next transfer goes to tcp directly
            remote.segment().fill((byte) 0);
            assertEquals(0, write());
            assertArrived();
            assertEquals(posted, fabric.postedRequests(), "no RDMA work request for the second transfer");
            assertEquals(4, initiator.fallbackSlices(), "routed to tcp directly, no second fallback");
            assertEquals(1, logs.matching(Level.WARN, "could not move a slice").size(), "logged once per peer");
        }
    }
}
