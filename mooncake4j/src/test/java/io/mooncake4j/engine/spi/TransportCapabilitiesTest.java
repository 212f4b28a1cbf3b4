package io.mooncake4j.engine.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The SPI's value types: memory kinds from locations, capability matching, buffer containment, retry classes. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransportCapabilitiesTest {

    @Test
    void locationsMapToKinds() {
        assertEquals(MemoryKind.HOST, MemoryKind.ofLocation("*"));
        assertEquals(MemoryKind.HOST, MemoryKind.ofLocation("cpu:1"));
        assertEquals(MemoryKind.CUDA, MemoryKind.ofLocation("cuda:0"));
        assertEquals(MemoryKind.CUDA, MemoryKind.ofLocation("CUDA:3"));
    }

    @Test
    void capabilitiesMatchBothSides() {
        TransportCapabilities hostOnly = new TransportCapabilities(Set.of(MemoryKind.HOST), Set.of(MemoryKind.HOST),
                true, false, false);
        assertTrue(hostOnly.moves(MemoryKind.HOST, MemoryKind.HOST));
        assertFalse(hostOnly.moves(MemoryKind.CUDA, MemoryKind.HOST));
        assertFalse(hostOnly.moves(MemoryKind.HOST, MemoryKind.CUDA));
    }

    @Test
    void localBufferContainmentIsUnsignedAndOverflowFree() {
        LocalBuffer b = LocalBuffer.of(0xFFFF_FFFF_FFFF_F000L, 0x1000, "cpu:0");
        assertTrue(b.contains(0xFFFF_FFFF_FFFF_F000L, 0x1000));
        assertFalse(b.contains(0xFFFF_FFFF_FFFF_F800L, 0x1000));
        assertFalse(b.contains(0x1000, 1));
        assertEquals(MemoryKind.HOST, b.kind());
    }

    @Test
    void onlyReachabilityFailuresAreRetried() {
        assertTrue(SliceFailure.UNREACHABLE.retryable());
        assertTrue(SliceFailure.TRANSIENT.retryable());
        assertFalse(SliceFailure.REJECTED.retryable());
        assertFalse(SliceFailure.TIMEOUT.retryable());
    }

    @Test
    void machineIdentityJoinsMachineAndBootIds(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Path m = java.nio.file.Files.writeString(dir.resolve("machine-id"), "ABC123\n");
        java.nio.file.Path b = java.nio.file.Files.writeString(dir.resolve("boot_id"), "b-1\n");
        assertEquals("abc123/b-1", MachineIdentity.compute(m, b));
        assertEquals("abc123/none", MachineIdentity.compute(m, dir.resolve("missing")));
        String a = MachineIdentity.compute(dir.resolve("x"), dir.resolve("y"));
        assertTrue(a.startsWith("jvm-"), a);
        assertFalse(a.equals(MachineIdentity.compute(dir.resolve("x"), dir.resolve("y"))));
        assertEquals(MachineIdentity.local(), MachineIdentity.local());
    }
}
