package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * On a machine without RDMA (like the build machine: its kernel has no InfiniBand support, so
 * {@code ibv_get_device_list} fails with ENOSYS) {@code initialize(..., "rdma", ...)} returns -1
 * with a message naming the cause and suggesting {@code "tcp"}, and binds nothing.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RdmaDiagnosisTest {

    private static RdmaAvailability.Cause cause() {
        Optional<RdmaAvailability.Cause> c = RdmaAvailability.unavailabilityCause();
        assumeTrue(c.isPresent(), "this machine has RDMA; the diagnosis cannot be observed");
        return c.get();
    }

    private static void assertDiagnosis(String error, RdmaAvailability.Cause cause) {
        assertTrue(error != null && error.contains(cause.message()), String.valueOf(error));
        assertTrue(error.contains("use protocol \"tcp\""), error);
        if (cause.reason() == RdmaAvailability.Reason.KERNEL_WITHOUT_RDMA) {
            assertTrue(error.contains("ENOSYS"), error);
        }
    }

    @Test
    void initializeRdmaOnThisMachineFailsNamingTheCauseAndSuggestingTcp() {
        RdmaAvailability.Cause cause = cause();
        try (CoreEngine e = EngineBuilder.only("rdma")) {
            assertEquals(-1, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "rdma", ""));
            assertDiagnosis(e.lastError(), cause);
            assertEquals(0, e.getRpcPort(), "no port bound");
            assertNull(e.protocol());
        }
    }

    @Test
    void enginesFromTheFactoryGiveTheSameDiagnosis() {
        RdmaAvailability.Cause cause = cause();
        for (String kind : new String[] {"rdma", "auto"}) {
            try (TransferEngine e = TransferEngines.create(kind)) {
                assertEquals(-1, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "rdma", ""), kind);
                assertDiagnosis(TransferEngines.lastError(e), cause);
            }
        }
    }

    @Test
    void theEmulatedProviderIsNotSubjectToTheMachinesAvailability() {
        cause();
        try (CoreEngine e = EmulatedEngines.started(new EmulatedRdmaProvider("emu0"), "")) {
            assertEquals("rdma", e.protocol());
        }
    }

    @Test
    void anUnknownDeviceNameIsNamedWithTheDevicesPresent() {
        try (CoreEngine e = EmulatedEngines.alone(new EmulatedRdmaProvider("emu0", "emu1"),
                EmulatedEngines.config())) {
            assertEquals(-1, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "rdma", "mlx5_7"));
            assertTrue(e.lastError().contains("mlx5_7") && e.lastError().contains("[emu0, emu1]"), e.lastError());
        }
    }

    @Test
    void protocolTcpIsNotServedByTheRdmaEngine() {
        try (CoreEngine e = EmulatedEngines.alone(new EmulatedRdmaProvider("emu0"),
                EmulatedEngines.config())) {
            assertEquals(-1, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "tcp", ""));
            assertTrue(e.lastError().contains("TransferEngines.create(\"tcp\")"), e.lastError());
        }
    }
}
