package io.mooncake4j.engine.rdma.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The bindings against the installed libibverbs, on a machine with or without RDMA devices. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class VerbsBindingsTest {

    private static boolean libraryInstalled() {
        return Files.exists(Path.of("/usr/lib/x86_64-linux-gnu/libibverbs.so.1"))
                || Files.exists(Path.of("/usr/lib/aarch64-linux-gnu/libibverbs.so.1"))
                || Files.exists(Path.of("/usr/lib64/libibverbs.so.1"));
    }

    @Test
    void shouldLoadLibibverbsWithAllRequiredSymbolsWhenInstalled() {
        assumeTrue(libraryInstalled(), "libibverbs.so.1 not installed (apt-get install libibverbs1)");
        assertTrue(Verbs.NATIVE_ACCESS_ENABLED, "tests run with --enable-native-access=ALL-UNNAMED");
        assertNull(Verbs.UNAVAILABLE);
        // rdma-core >= 34 exports all three optional verbs
        assertEquals(java.util.Set.of("ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_query_gid_ex"),
                VerbsLibrary.capabilities());
    }

    @Test
    void shouldReportEnosysWhenTheKernelHasNoInfinibandSupport() {
        assumeTrue(libraryInstalled(), "libibverbs.so.1 not installed");
        assumeFalse(Files.exists(Path.of("/sys/class/infiniband_verbs")), "kernel has InfiniBand support");
        VerbsException e = assertThrows(VerbsException.class, IbvDeviceList::get);
        assertEquals("ibv_get_device_list", e.operation());
        assertEquals(Verbs.ENOSYS, e.errno());
        assertTrue(e.getMessage().contains("ENOSYS") && e.getMessage().contains("\"tcp\""), e.getMessage());
        VerbsLibrary.DeviceProbe probe = VerbsLibrary.probeDevices();
        assertEquals(Verbs.ENOSYS, probe.errno());
        assertEquals(0, probe.deviceCount());
    }

    @Test
    void regMrHintShouldNameTheMemlockFix() {
        String hint = IbvPd.regHint(Verbs.ENOMEM, 0x1000, 4096, IbvPd.ACCESS_LOCAL_WRITE);
        assertTrue(hint.contains("ulimit -l") && hint.contains("limits.conf"), hint);
        assertTrue(IbvPd.regHint(Verbs.EFAULT, 0x1000, 4096, 1).contains("not mapped"));
    }

    @Test
    void errnoNamesShouldBeSymbolic() {
        assertEquals("ENOSYS", VerbsException.errnoName(38));
        assertEquals("ENOMEM", VerbsException.errnoName(12));
        assertEquals("errno 999", VerbsException.errnoName(999));
        assertTrue(new VerbsException("ibv_modify_qp", 22, "x").getMessage().startsWith("ibv_modify_qp failed: errno 22 (EINVAL)"));
    }
}
