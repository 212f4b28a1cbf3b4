package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.rdma.RdmaAvailability.Cause;
import io.mooncake4j.engine.rdma.RdmaAvailability.Reason;
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
        assertEquals("tcp", ProtocolSelection.resolve("TCP", "", Map.of(), ENOSYS, NEVER, new AtomicBoolean()));
    }

    @Test
    void explicitRdmaWithoutRdmaShouldFailWithTheDiagnosis() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("rdma", "", Map.of(), ENOSYS, NEVER, new AtomicBoolean()));
        assertTrue(e.getMessage().contains("ENOSYS") && e.getMessage().contains("\"tcp\""), e.getMessage());
    }

    @Test
    void explicitRdmaShouldCheckDeviceName() {
        assertEquals("rdma", ProtocolSelection.resolve("rdma", "mlx5_1", Map.of(), Optional.empty(), TWO, new AtomicBoolean()));
        assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("rdma", "mlx5_9", Map.of(), Optional.empty(), TWO, new AtomicBoolean()));
    }

    @Test
    void autoShouldFallBackToTcpAndWarnOnce() {
        AtomicBoolean warned = new AtomicBoolean();
        assertEquals("tcp", ProtocolSelection.resolve(null, "", Map.of(), ENOSYS, NEVER, warned));
        assertTrue(warned.get());
        assertEquals("tcp", ProtocolSelection.resolve("auto", "", Map.of(), ENOSYS, NEVER, warned));
    }

    @Test
    void autoShouldPickRdmaWhenADeviceSurvivesTheFilter() {
        assertEquals("rdma", ProtocolSelection.resolve("", "mlx5_0", Map.of(), Optional.empty(), TWO, new AtomicBoolean()));
        AtomicBoolean warned = new AtomicBoolean();
        assertEquals("tcp", ProtocolSelection.resolve("", "mlx5_7", Map.of(), Optional.empty(), TWO, warned));
        assertTrue(warned.get());
    }

    @Test
    void mcForceTcpShouldWinInAutoMode() {
        assertEquals("tcp", ProtocolSelection.resolve("auto", "", Map.of("MC_FORCE_TCP", "1"), Optional.empty(), NEVER,
                new AtomicBoolean()));
    }

    @Test
    void unknownProtocolShouldBeRejected() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> ProtocolSelection.resolve("efa", "", Map.of(), Optional.empty(), NEVER, new AtomicBoolean()));
        assertTrue(e.getMessage().contains("efa"));
    }
}
