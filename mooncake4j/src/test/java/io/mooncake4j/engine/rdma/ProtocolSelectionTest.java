package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.rdma.RdmaAvailability.Cause;
import io.mooncake4j.engine.rdma.RdmaAvailability.Reason;
import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ProtocolSelectionTest {

    private static final Optional<Cause> ENOSYS = Optional.of(new Cause(Reason.KERNEL_WITHOUT_RDMA,
            "RDMA transport unavailable: ENOSYS; to run without RDMA use protocol \"tcp\""));
    private static final Supplier<List<String>> TWO = () -> List.of("mlx5_0", "mlx5_1");
    private static final Supplier<List<String>> NEVER = () -> {
        throw new AssertionError("devices must not be listed");
    };

    @Test
    void explicitTcpShouldNeverTouchRdma() {
        assertEquals("tcp", ProtocolSelection.resolve("TCP", "", false, ENOSYS, NEVER, new AtomicBoolean()));
    }

    @Test
    void explicitRdmaWithoutRdmaShouldFailWithTheDiagnosis() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("rdma", "", false, ENOSYS, NEVER, new AtomicBoolean()));
        assertTrue(e.getMessage().contains("ENOSYS") && e.getMessage().contains("\"tcp\""), e.getMessage());
    }

    @Test
    void explicitRdmaShouldCheckDeviceName() {
        assertEquals("rdma", ProtocolSelection.resolve("rdma", "mlx5_1", false, Optional.empty(), TWO, new AtomicBoolean()));
        assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("rdma", "mlx5_9", false, Optional.empty(), TWO, new AtomicBoolean()));
    }

    @Test
    void autoShouldFallBackToTcpAndWarnOnce() {
        AtomicBoolean warned = new AtomicBoolean();
        assertEquals("tcp", ProtocolSelection.resolve(null, "", false, ENOSYS, NEVER, warned));
        assertTrue(warned.get());
        assertEquals("tcp", ProtocolSelection.resolve("auto", "", false, ENOSYS, NEVER, warned));
    }

    @Test
    void autoShouldPickRdmaWhenADeviceSurvivesTheFilter() {
        assertEquals("rdma", ProtocolSelection.resolve("", "mlx5_0", false, Optional.empty(), TWO, new AtomicBoolean()));
        AtomicBoolean warned = new AtomicBoolean();
        assertEquals("tcp", ProtocolSelection.resolve("", "mlx5_7", false, Optional.empty(), TWO, warned));
        assertTrue(warned.get());
    }

    @Test
    void mcForceTcpShouldWinInAutoMode() {
        HandshakeConfig hs = HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress());
        boolean forceTcp = RdmaEngineConfig.fromEnvironment(Map.of("MC_FORCE_TCP", "1"), hs).forceTcp();
        assertTrue(forceTcp);
        assertFalse(RdmaEngineConfig.fromEnvironment(Map.of(), hs).forceTcp());
        assertEquals("tcp", ProtocolSelection.resolve("auto", "", forceTcp, Optional.empty(), NEVER,
                new AtomicBoolean()));
    }

    @Test
    void unknownProtocolShouldBeRejected() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("efa", "", false, Optional.empty(), NEVER, new AtomicBoolean()));
        assertTrue(e.getMessage().contains("efa"));
    }
}
