package io.mooncake4j.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.rdma.RdmaAvailability;
import io.mooncake4j.engine.rdma.RdmaTransferEngine;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransferEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.net.InetAddress;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Engine kind {@code "auto"}: the protocol argument picks TCP or RDMA at initialize. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ProtocolSelectingEngineTest {

    private static ProtocolSelectingEngine engine() {
        return new ProtocolSelectingEngine(() -> new TcpTransferEngine(TcpConfig.fromEnvironment(Map.of(),
                HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()))), RdmaTransferEngine::new);
    }

    @Test
    void autoWithoutRdmaFallsBackToTcpAndWorks() {
        assumeTrue(!RdmaAvailability.isAvailable(), "RDMA is available here: auto would pick it");
        try (ProtocolSelectingEngine e = engine(); HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            assertEquals(0, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", ""));
            assertEquals("tcp", e.protocol());
            HostMemoryStorage a = alloc.allocate(8192);
            assertEquals(0, e.registerMemory(a.address(), 4096, "cpu:0"));
            assertEquals(0, e.registerMemory(a.address() + 4096, 4096, "cpu:0"));
            a.segment().asSlice(0, 4096).fill((byte) 9);
            assertEquals(0, e.batchTransferSyncWrite(e.getLocalSegmentName(), new long[] {a.address()},
                    new long[] {a.address() + 4096}, new long[] {4096}));
            assertEquals(9, a.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 8191));
        }
    }

    @Test
    void emptyProtocolMeansAutoAndTcpMeansTcp() {
        assumeTrue(!RdmaAvailability.isAvailable(), "RDMA is available here: auto would pick it");
        for (String p : new String[] {"", "tcp", "TCP"}) {
            try (ProtocolSelectingEngine e = engine()) {
                assertEquals(0, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, p, ""), p);
                assertEquals("tcp", e.protocol());
                assertTrue(e.getRpcPort() > 0);
            }
        }
    }

    @Test
    void beforeInitializeEveryCallFailsCleanly() {
        try (ProtocolSelectingEngine e = engine()) {
            assertEquals(ErrorCodes.INVALID_ARGUMENT, e.registerMemory(4096, 4096, "cpu:0"));
            assertEquals(-1, e.openSegment("x:1"));
            assertEquals(StatusCodes.INVALID_ARGUMENT, e.getTransferStatus(1, 0).code());
            assertEquals(-1, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "nvlink", ""));
            assertTrue(e.lastError().contains("unsupported protocol"), e.lastError());
        }
    }

    @Test
    void gpuMemoryAnswerComesFromTheInstalledEngine() {
        assumeTrue(!RdmaAvailability.isAvailable(), "RDMA is available here: auto would pick it");
        try (io.mooncake4j.memory.FakeDeviceMemory gpu = new io.mooncake4j.memory.FakeDeviceMemory(1);
             ProtocolSelectingEngine e = new ProtocolSelectingEngine(() -> new TcpTransferEngine(
                     TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress())),
                     gpu), RdmaTransferEngine::new)) {
            assertEquals(DeviceMemoryAccess.Kind.UNKNOWN, e.deviceMemoryAccess("cuda:0").kind(), "before initialize");
            assertEquals(0, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", ""));
            assertEquals(DeviceMemoryAccess.Kind.STAGED, e.deviceMemoryAccess("cuda:0").kind());
        }
    }

    @Test
    void factoryKnowsTheNewKinds() {
        assertTrue(TransferEngines.kinds().containsAll(java.util.List.of("mock", "tcp", "rdma", "auto")));
        try (TransferEngine e = TransferEngines.create("rdma")) {
            assertTrue(e instanceof RdmaTransferEngine);
        }
    }
}
