package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.sys.ResourceLimits;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MemlockCheckTest {

    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;

    @Test
    void shouldCountEveryDeviceAgainstTheLimit() {
        // 40 MiB fits a 64 MiB limit on one NIC, not on two
        assertTrue(MemlockCheck.check(40 * MIB, 0, 1, OptionalLong.of(64 * MIB)).isEmpty());
        Optional<String> two = MemlockCheck.check(40 * MIB, 0, 2, OptionalLong.of(64 * MIB));
        assertTrue(two.isPresent());
        assertTrue(two.get().contains("pins 80.0 MiB"), two.get());
        assertTrue(two.get().contains("RLIMIT_MEMLOCK = 64.0 MiB"), two.get());
        assertTrue(two.get().contains("ulimit -l") && two.get().contains("limits.conf"), two.get());
    }

    @Test
    void shouldIncludeWhatIsAlreadyRegistered() {
        assertTrue(MemlockCheck.check(32 * MIB, 32 * MIB, 1, OptionalLong.of(64 * MIB)).isEmpty());
        assertTrue(MemlockCheck.check(32 * MIB, 33 * MIB, 1, OptionalLong.of(64 * MIB)).isPresent());
    }

    @Test
    void unlimitedOrUnknownLimitShouldPass() {
        assertEquals(Optional.empty(), MemlockCheck.check(512 * GIB, 0, 8, OptionalLong.of(ResourceLimits.UNLIMITED)));
        assertEquals(Optional.empty(), MemlockCheck.check(512 * GIB, 0, 8, OptionalLong.empty()));
    }

    @Test
    void hugeProductsShouldSaturateInsteadOfOverflowing() {
        assertTrue(MemlockCheck.check(Long.MAX_VALUE / 2, 0, 8, OptionalLong.of(64 * MIB)).isPresent());
    }
}
