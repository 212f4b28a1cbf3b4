package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.internal.sys.ResourceLimits;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Compares what a registration will pin with {@code RLIMIT_MEMLOCK} before calling
 * {@code ibv_reg_mr}: every buffer is registered on every device, and each registration counts
 * against the limit, so the cost is bytes × devices. A failure names the fix instead of
 * surfacing as a bare {@code ENOMEM} from the NIC driver.
 */
public final class MemlockCheck {

    private MemlockCheck() {}

    /**
     * The problem, if registering {@code newBytes} more on {@code devices} devices, after
     * {@code alreadyRegisteredBytes} (per device) are registered, would exceed {@code softLimit}.
     * An unknown limit or {@link ResourceLimits#UNLIMITED} passes.
     */
    public static Optional<String> check(long newBytes, long alreadyRegisteredBytes, int devices, OptionalLong softLimit) {
        if (newBytes < 0 || alreadyRegisteredBytes < 0 || devices < 0) {
            throw new IllegalArgumentException("negative size or device count");
        }
        if (softLimit.isEmpty() || softLimit.getAsLong() == ResourceLimits.UNLIMITED || devices == 0) {
            return Optional.empty();
        }
        long limit = softLimit.getAsLong();
        long perDevice = saturatedAdd(newBytes, alreadyRegisteredBytes);
        long pinned = saturatedMultiply(perDevice, devices);
        if (Long.compareUnsigned(pinned, limit) <= 0) {
            return Optional.empty();
        }
        return Optional.of(String.format(java.util.Locale.ROOT,
                "registering %s (%s already registered) on %d RDMA device%s pins %s, above the"
                        + " locked-memory limit RLIMIT_MEMLOCK = %s. Raise it: 'ulimit -l unlimited' in the"
                        + " launching shell, '* - memlock unlimited' in /etc/security/limits.conf (then log in"
                        + " again), LimitMEMLOCK=infinity for a systemd service, or --ulimit memlock=-1 for"
                        + " Docker",
                Bytes.human(newBytes), Bytes.human(alreadyRegisteredBytes), devices, devices == 1 ? "" : "s",
                Bytes.human(pinned), ResourceLimits.describe(limit)));
    }

    /** {@link #check} against this process's soft limit; throws when it would be exceeded. */
    public static void requireFits(long newBytes, long alreadyRegisteredBytes, int devices) {
        check(newBytes, alreadyRegisteredBytes, devices, ResourceLimits.memlockSoftLimit()).ifPresent(msg -> {
            throw new TransferEngineException(msg);
        });
    }

    private static long saturatedAdd(long a, long b) {
        long r = a + b;
        return r < 0 ? Long.MAX_VALUE : r;
    }

    private static long saturatedMultiply(long a, int b) {
        return Math.multiplyHigh(a, b) != 0 || a * b < 0 ? Long.MAX_VALUE : a * b;
    }
}
