package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.internal.sys.SharedMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Per-request selection in the engine core with shm and tcp installed: shm between two mooncake4j
 * engines on one machine, plain TCP towards a peer that speaks only Mooncake's wire (as the C++
 * engine: a descriptor without extensions), and {@code MC_TRANSPORTS} restricting the set.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TransportSelectionTest {

    private static final long LEN = 256 << 10;

    private HostMemoryAllocator alloc;
    private HostMemoryStorage local;
    private HostMemoryStorage remote;

    /** The core offering shm and tcp on 127.0.0.1. */
    static CoreEngine shmAndTcp(Map<String, String> env) {
        TcpConfig tcp = TcpEngines.config();
        return new EngineBuilder().settings(TcpTransport.engineSettings(tcp)).environment(env).offer(
                new TransportFactory(ShmTransport.DECLARATION, ShmTransport::new),
                new TransportFactory(TcpTransport.DECLARATION, () -> new TcpTransport(tcp))).build();
    }

    private static CoreEngine started(CoreEngine e, String protocol) {
        if (e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, protocol, "") != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    @BeforeEach
    void setUp() {
        alloc = new HostMemoryAllocator();
        local = alloc.allocate(LEN);
        remote = alloc.allocateShareable(LEN); // mappable by shm if it were offered
        for (long i = 0; i < LEN; i += 8) {
            local.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i ^ 0x5a5a5a5aL);
        }
    }

    @AfterEach
    void tearDown() {
        alloc.close();
    }

    private static int write(TransferEngine from, TransferEngine to, HostMemoryStorage src, HostMemoryStorage dst) {
        return from.batchTransferSyncWrite(to.getLocalSegmentName(), new long[] {src.address()},
                new long[] {dst.address()}, new long[] {LEN});
    }

    private void assertArrived() {
        assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), remote.segment().toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void aPeerSpeakingOnlyMooncakesWireGetsPlainTcp() {
        try (CoreEngine a = started(shmAndTcp(Map.of()), "auto"); CoreEngine cppLike = TcpEngines.started()) {
            assertTrue(cppLike.localDescriptor().extensions().isEmpty(), "a C++-shaped descriptor");
            assertEquals(0, cppLike.registerMemory(remote.address(), LEN, "cpu:0"));
            assertEquals(0, a.registerMemory(local.address(), LEN, "cpu:0"));
            assertEquals(0, write(a, cppLike, local, remote));
            assertArrived();
            assertTrue(TcpTransport.in(cppLike).openDataSessions() > 0, "the bytes came in on the TCP data port");
        }
    }

    @Test
    void twoMooncake4jEnginesOnOneMachineUseShm() {
        assumeTrue(SharedMemory.available(), "shm needs native access on Linux");
        try (CoreEngine a = started(shmAndTcp(Map.of()), "auto"); CoreEngine b = started(shmAndTcp(Map.of()), "auto")) {
            assertEquals(List.of("shm", "tcp"), a.transportNames());
            assertEquals("tcp", a.protocol(), "the descriptor still says tcp for Mooncake peers");
            assertEquals(0, b.registerMemory(remote.address(), LEN, "cpu:0"));
            assertEquals(0, a.registerMemory(local.address(), LEN, "cpu:0"));
            assertEquals(0, write(a, b, local, remote));
            assertArrived();
            assertEquals(0, ((TcpTransport) b.transport("tcp")).openDataSessions(), "no TCP connection was needed");
        }
    }

    @Test
    void mcTransportsRestrictsTheSet() {
        try (CoreEngine a = started(shmAndTcp(Map.of("MC_TRANSPORTS", "tcp")), "auto")) {
            assertEquals(List.of("tcp"), a.transportNames());
        }
        try (CoreEngine a = shmAndTcp(Map.of("MC_TRANSPORTS", "tcp"))) {
            assertEquals(-1, a.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "shm", ""));
            assertTrue(a.lastError().contains("MC_TRANSPORTS=tcp excludes"), a.lastError());
            assertEquals(0, a.getRpcPort(), "nothing bound");
        }
        try (CoreEngine a = shmAndTcp(Map.of("MC_TRANSPORTS", "tcp,nvlink"))) {
            assertEquals(-1, a.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", ""));
            assertTrue(a.lastError().contains("unknown transport 'nvlink'"), a.lastError());
        }
    }

    @Test
    void protocolTcpInstallsTcpOnlyAndAnUnknownProtocolIsRefused() {
        try (CoreEngine a = started(shmAndTcp(Map.of()), "tcp")) {
            assertEquals(List.of("tcp"), a.transportNames());
        }
        try (CoreEngine a = shmAndTcp(Map.of())) {
            assertEquals(-1, a.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "nvlink", ""));
            assertTrue(a.lastError().contains("unsupported protocol 'nvlink'"), a.lastError());
        }
    }
}
