package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The issue-9 limits: defaults, environment variables, bad values falling back to the default. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ReliabilityLimitsConfigTest {

    @Test
    void tcpLimitsHaveDefaultsAndAreReadFromTheEnvironment() {
        TcpConfig d = TcpConfig.fromEnvironment(Map.of());
        assertEquals(300_000, d.dataIdleTimeoutMs());
        assertEquals(4096, d.maxDataConnections());
        assertEquals(60_000, d.peerIdleTimeoutMs());
        assertEquals(256, d.maxPeers());
        assertEquals(4096, d.maxSegments());
        TcpConfig c = TcpConfig.fromEnvironment(Map.of("MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC", "20",
                "MOONCAKE4J_TCP_DATA_MAX_CONNECTIONS", "100", "MOONCAKE4J_TCP_PEER_IDLE_TIMEOUT_SEC", "5",
                "MOONCAKE4J_TCP_MAX_PEERS", "7", "MOONCAKE4J_TCP_MAX_SEGMENTS", "9"));
        assertEquals(20_000, c.dataIdleTimeoutMs());
        assertEquals(100, c.maxDataConnections());
        assertEquals(5_000, c.peerIdleTimeoutMs());
        assertEquals(7, c.maxPeers());
        assertEquals(9, c.maxSegments());
        TcpConfig bad = TcpConfig.fromEnvironment(Map.of("MOONCAKE4J_TCP_MAX_PEERS", "0",
                "MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC", "x"));
        assertEquals(256, bad.maxPeers());
        assertEquals(300_000, bad.dataIdleTimeoutMs());
        // the copies keep the limits
        assertEquals(7, c.withTimeouts(1000, 2000).maxPeers());
        assertEquals(9, c.withLanes(2, 8).maxSegments());
        assertThrows(IllegalArgumentException.class, () -> d.withPeerLimits(0, 1, 1));
    }

    @Test
    void handshakeLimitsHaveDefaultsAndAreReadFromTheEnvironment() {
        HandshakeConfig d = HandshakeConfig.fromEnvironment(Map.of());
        assertEquals(10_000, d.serverRequestTimeoutMs());
        assertEquals(30_000, d.clientRequestTimeoutMs());
        assertEquals(256, d.maxConcurrentConnections());
        HandshakeConfig c = HandshakeConfig.fromEnvironment(Map.of("MOONCAKE4J_HANDSHAKE_REQUEST_TIMEOUT_MS", "1500",
                "MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS", "2500", "MOONCAKE4J_HANDSHAKE_MAX_CONNECTIONS", "32"));
        assertEquals(1500, c.serverRequestTimeoutMs());
        assertEquals(2500, c.clientRequestTimeoutMs());
        assertEquals(32, c.maxConcurrentConnections());
        assertEquals(10_000, HandshakeConfig.fromEnvironment(
                Map.of("MOONCAKE4J_HANDSHAKE_REQUEST_TIMEOUT_MS", "-1")).serverRequestTimeoutMs());
        assertEquals(2500, c.withTimeouts(1000, 1000).clientRequestTimeoutMs());
    }

    @Test
    void bootstrapLimitsHaveDefaultsAndAreReadFromTheEnvironment() {
        MooncakeBootstrapServer.Limits d = MooncakeBootstrapServer.Limits.fromEnvironment(Map.of());
        assertEquals(MooncakeBootstrapServer.Limits.defaults(), d);
        assertEquals(10_000, d.requestTimeoutMs());
        assertEquals(256, d.maxConnections());
        assertEquals(1024, d.maxEngines());
        assertEquals(1024, d.maxWorkersPerEngine());
        assertEquals(8192, d.maxWorkers());
        MooncakeBootstrapServer.Limits c = MooncakeBootstrapServer.Limits.fromEnvironment(Map.of(
                "MOONCAKE4J_BOOTSTRAP_REQUEST_TIMEOUT_MS", "500", "MOONCAKE4J_BOOTSTRAP_MAX_CONNECTIONS", "8",
                "MOONCAKE4J_BOOTSTRAP_MAX_ENGINES", "3", "MOONCAKE4J_BOOTSTRAP_MAX_WORKERS_PER_ENGINE", "4",
                "MOONCAKE4J_BOOTSTRAP_MAX_WORKERS", "5"));
        assertEquals(new MooncakeBootstrapServer.Limits(500, 8, 16 * 1024, 1 << 20, 3, 4, 5), c);
        assertEquals(256, MooncakeBootstrapServer.Limits.fromEnvironment(
                Map.of("MOONCAKE4J_BOOTSTRAP_MAX_CONNECTIONS", "many")).maxConnections());
    }
}
