package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Mooncake's environment variables: defaults, overrides, aliases and out-of-range fallbacks. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TcpConfigTest {

    @Test
    void defaultsAreMooncakes() {
        TcpConfig c = TcpConfig.fromEnvironment(Map.of());
        HandshakeConfig h = c.handshake();
        assertEquals(15000, h.minPort());
        assertEquals(17000, h.maxPort());
        assertNull(h.bindAddress(), "wildcard");
        assertEquals(1 << 20, h.maxFrameLength());
        assertEquals(5000, h.connectTimeoutMs());
        assertEquals(60_000, h.clientReadTimeoutMs());
        assertEquals(5000, h.serverReadTimeoutMs());
        assertEquals(128, h.backlog());
        assertEquals(12001, h.defaultPort());
        assertEquals(30_000, c.statusTimeoutMs());
        assertEquals(4, c.lanesPerPeer());
        assertEquals(30_000, c.transferTimeoutMs());
        assertEquals(h, c.dataListen(), "data port uses the RPC port's range");
    }

    @Test
    void framingAndStagingComeWithTheRestOfTheSettings() {
        TcpConfig d = TcpConfig.fromEnvironment(Map.of());
        assertFalse(d.forceV1());
        assertEquals(StagingConfig.DEFAULTS, d.staging());
        TcpConfig c = TcpConfig.fromEnvironment(Map.of("MC_TCP_PROTO", "1", "MOONCAKE4J_TCP_STAGING_DEPTH", "8"));
        assertTrue(c.forceV1(), "MC_TCP_PROTO=1 forces v1 framing");
        assertEquals(new StagingConfig(1 << 20, 8, 8), c.staging());
        assertFalse(TcpConfig.fromEnvironment(Map.of("MC_TCP_PROTO", "2")).forceV1(), "only 1 forces v1");
        assertTrue(c.withLanes(2, 8).forceV1(), "copies keep it");
    }

    @Test
    void overridesAndAliasesAreHonoured() {
        TcpConfig c = TcpConfig.fromEnvironment(Map.of("MC_MIN_PRC_PORT", "20000", "MC_MAX_RPC_PORT", "20010",
                "MC_HANDSHAKE_MAX_LENGTH", "4194304", "MC_HANDSHAKE_CONNECT_TIMEOUT", "9",
                "MC_TCP_STATUS_TIMEOUT_SEC", "7", "MC_TCP_MAX_CONNECTIONS_PER_PEER", "2", "MC_TRANSFER_TIMEOUT", "60",
                "MC_HANDSHAKE_PORT", "13000"));
        assertEquals(20000, c.handshake().minPort());
        assertEquals(20010, c.handshake().maxPort());
        assertEquals(4 << 20, c.handshake().maxFrameLength());
        assertEquals(9000, c.handshake().connectTimeoutMs());
        assertEquals(13000, c.handshake().defaultPort());
        assertEquals(7000, c.statusTimeoutMs());
        assertEquals(2, c.lanesPerPeer());
        assertEquals(60_000, c.transferTimeoutMs());
    }

    @Test
    void outOfRangeValuesFallBackToDefaults() {
        TcpConfig c = TcpConfig.fromEnvironment(Map.of("MC_MIN_RPC_PORT", "40000", "MC_MAX_RPC_PORT", "40010",
                "MC_HANDSHAKE_MAX_LENGTH", "999999999", "MC_TCP_LANES_PER_PEER", "17", "MC_TRANSFER_TIMEOUT", "1",
                "MC_HANDSHAKE_CONNECT_TIMEOUT", "x"));
        assertEquals(15000, c.handshake().minPort(), "32768-60999 is the ephemeral range");
        assertEquals(17000, c.handshake().maxPort());
        assertEquals(1 << 20, c.handshake().maxFrameLength());
        assertEquals(5000, c.handshake().connectTimeoutMs());
        assertEquals(4, c.lanesPerPeer());
        assertEquals(5000, c.transferTimeoutMs(), "MC_TRANSFER_TIMEOUT has a 5 s minimum");
        TcpConfig inverted = TcpConfig.fromEnvironment(Map.of("MC_MIN_RPC_PORT", "17000", "MC_MAX_RPC_PORT", "16000"));
        assertEquals(15000, inverted.handshake().minPort());
    }
}
