package io.mooncake4j.internal.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class CapabilitiesTest {

    @Test
    void shouldReadCapIpcLockFromTheEffectiveMask() {
        // root in a default Docker container: CAP_IPC_LOCK (bit 14) is not in Docker's default set
        String docker = "Name:\tjava\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\n"
                + "CapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\n";
        assertEquals(OptionalLong.of(0xa80425fbL), Capabilities.parseEffective(docker));
        assertFalse(Capabilities.has(Capabilities.parseEffective(docker), Capabilities.CAP_IPC_LOCK));
        // --cap-add IPC_LOCK adds 0x4000
        String withIpcLock = docker.replace("CapEff:\t00000000a80425fb", "CapEff:\t00000000a80465fb");
        assertTrue(Capabilities.has(Capabilities.parseEffective(withIpcLock), Capabilities.CAP_IPC_LOCK));
        // full root on bare metal
        assertTrue(Capabilities.has(Capabilities.parseEffective("CapEff:\t000001ffffffffff\n"), 14));
        // only the permitted set has it: not effective, not applied by the kernel
        assertFalse(Capabilities.has(Capabilities.parseEffective("CapPrm:\t0000000000004000\nCapEff:\t0\n"), 14));
    }

    @Test
    void missingOrMalformedStatusReadsAsNoCapability(@TempDir Path dir) throws IOException {
        assertEquals(OptionalLong.empty(), Capabilities.parseEffective("Name:\tjava\n"));
        assertEquals(OptionalLong.empty(), Capabilities.parseEffective("CapEff:\tzz\n"));
        assertEquals(OptionalLong.empty(), Capabilities.parseEffective("CapEff:\t\n"));
        assertEquals(OptionalLong.empty(), Capabilities.effective(dir.resolve("absent")));
        Path f = Files.writeString(dir.resolve("status"), "CapEff:\t0000000000004000\n");
        assertTrue(Capabilities.has(Capabilities.effective(f), Capabilities.CAP_IPC_LOCK));
        assertFalse(Capabilities.has(OptionalLong.empty(), Capabilities.CAP_IPC_LOCK));
    }

    @Test
    void theEffectiveMemlockLimitIsUnlimitedExactlyWithCapIpcLock() {
        boolean cap = Capabilities.hasIpcLock();
        OptionalLong effective = ResourceLimits.effectiveMemlockLimit();
        if (cap) {
            assertEquals(OptionalLong.of(ResourceLimits.UNLIMITED), effective);
        } else {
            assertEquals(ResourceLimits.memlockSoftLimit(), effective);
        }
    }
}
