package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.rdma.RdmaAvailability.Cause;
import io.mooncake4j.engine.rdma.RdmaAvailability.Reason;
import io.mooncake4j.engine.rdma.verbs.VerbsLibrary.DeviceProbe;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RdmaAvailabilityTest {

    private static final DeviceProbe TWO_DEVICES = new DeviceProbe(2, 0, null);

    @Test
    void shouldBlameDisabledNativeAccessFirstAndNotProbe() {
        AtomicInteger probes = new AtomicInteger();
        Cause c = RdmaAvailability.diagnose(false, Optional.of("ignored"), () -> {
            probes.incrementAndGet();
            return TWO_DEVICES;
        }).orElseThrow();
        assertEquals(Reason.NATIVE_ACCESS_DISABLED, c.reason());
        assertTrue(c.message().contains("--enable-native-access=ALL-UNNAMED"), c.message());
        assertTrue(c.message().contains("protocol \"tcp\""), c.message());
        assertEquals(0, probes.get());
    }

    @Test
    void shouldNameTheMissingLibraryAndHowToInstallIt() {
        Cause c = RdmaAvailability.diagnose(true, Optional.of("libibverbs.so.1 could not be loaded: not found"),
                () -> TWO_DEVICES).orElseThrow();
        assertEquals(Reason.LIBRARY_MISSING, c.reason());
        assertTrue(c.message().contains("libibverbs.so.1") && c.message().contains("apt-get install libibverbs1"), c.message());
        assertTrue(c.message().endsWith("use protocol \"tcp\""), c.message());
    }

    @Test
    void shouldExplainEnosysAsAKernelWithoutRdma() {
        Cause c = RdmaAvailability.diagnose(true, Optional.empty(),
                () -> new DeviceProbe(0, 38, "ibv_get_device_list failed: errno 38 (ENOSYS)")).orElseThrow();
        assertEquals(Reason.KERNEL_WITHOUT_RDMA, c.reason());
        assertTrue(c.message().contains("ENOSYS") && c.message().contains("ib_uverbs"), c.message());
    }

    @Test
    void shouldReportOtherListFailuresWithTheirErrno() {
        Cause c = RdmaAvailability.diagnose(true, Optional.empty(),
                () -> new DeviceProbe(0, 13, "ibv_get_device_list failed: errno 13 (EACCES): no permission")).orElseThrow();
        assertEquals(Reason.DEVICE_LIST_FAILED, c.reason());
        assertTrue(c.message().contains("EACCES"), c.message());
    }

    @Test
    void shouldReportAnEmptyDeviceList() {
        Cause c = RdmaAvailability.diagnose(true, Optional.empty(), () -> new DeviceProbe(0, 0, null)).orElseThrow();
        assertEquals(Reason.NO_DEVICES, c.reason());
        assertTrue(c.message().contains("ibv_devices"), c.message());
    }

    @Test
    void shouldBeAvailableWithDevices() {
        assertTrue(RdmaAvailability.diagnose(true, Optional.empty(), () -> TWO_DEVICES).isEmpty());
    }

    @Test
    void thisMachineWithoutRdmaShouldBeDiagnosedAndRefused() {
        assumeFalse(Files.exists(Path.of("/sys/class/infiniband_verbs")), "this machine has RDMA verbs support");
        assertFalse(RdmaAvailability.isAvailable());
        Cause c = RdmaAvailability.unavailabilityCause().orElseThrow();
        assertTrue(c.reason() == Reason.KERNEL_WITHOUT_RDMA || c.reason() == Reason.LIBRARY_MISSING
                || c.reason() == Reason.NO_DEVICES, c.toString());
        TransferEngineException e = assertThrows(TransferEngineException.class, RdmaAvailability::ensureAvailable);
        assertTrue(e.getMessage().contains("protocol \"tcp\""), e.getMessage());
    }
}
