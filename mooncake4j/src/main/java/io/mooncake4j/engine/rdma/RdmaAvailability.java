package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.rdma.verbs.VerbsLibrary;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Whether the RDMA transport can run here, and if not, why, in words that name the fix and
 * suggest protocol {@code "tcp"}. The probe runs once per JVM (loading libibverbs and listing
 * devices); the result is cached.
 *
 * <p>Causes, checked in this order: native access disabled, libibverbs missing (or lacking
 * required symbols), {@code ibv_get_device_list} failing with {@code ENOSYS} (kernel without
 * InfiniBand/RDMA support), failing otherwise, or listing no devices.
 */
public final class RdmaAvailability {

    /** Why RDMA is unavailable. */
    public enum Reason {
        NATIVE_ACCESS_DISABLED,
        LIBRARY_MISSING,
        KERNEL_WITHOUT_RDMA,
        DEVICE_LIST_FAILED,
        NO_DEVICES
    }

    /**
     * A reason and its actionable message.
     *
     * @param reason  what is missing
     * @param message the cause and the fix, in words
     */
    public record Cause(Reason reason, String message) {}

    /** {@code ENOSYS} on Linux. */
    static final int ENOSYS = 38;

    private static final String USE_TCP = "; to run without RDMA use protocol \"tcp\"";

    private RdmaAvailability() {}

    private static final class Holder {
        static final Optional<Cause> CAUSE = diagnose(VerbsLibrary.nativeAccessEnabled(),
                VerbsLibrary.unavailability(), VerbsLibrary::probeDevices);
    }

    /** True when libibverbs loads and lists at least one RDMA device. */
    public static boolean isAvailable() {
        return Holder.CAUSE.isEmpty();
    }

    /** Why RDMA is unavailable; empty when it is available. */
    public static Optional<Cause> unavailabilityCause() {
        return Holder.CAUSE;
    }

    /** Throws the unavailability as a control-path exception (for {@code initialize(..., "rdma", ...)}). */
    public static void ensureAvailable() {
        Optional<Cause> c = unavailabilityCause();
        if (c.isPresent()) {
            throw new TransferEngineException(c.get().message());
        }
    }

    /** The decision, separated from the probing so each cause can be tested. */
    static Optional<Cause> diagnose(boolean nativeAccessEnabled, Optional<String> libraryFailure,
                                    Supplier<VerbsLibrary.DeviceProbe> probe) {
        if (!nativeAccessEnabled) {
            return Optional.of(new Cause(Reason.NATIVE_ACCESS_DISABLED,
                    "RDMA transport unavailable: native access is not enabled (run with"
                            + " --enable-native-access=ALL-UNNAMED on the class path, or"
                            + " --enable-native-access=io.mooncake4j on the module path; bin/mooncake4j"
                            + " sets it)" + USE_TCP));
        }
        if (libraryFailure.isPresent()) {
            return Optional.of(new Cause(Reason.LIBRARY_MISSING, String.format(Locale.ROOT,
                    "RDMA transport unavailable: %s. Install rdma-core's verbs library and the NIC"
                            + " provider (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers;"
                            + " RHEL: dnf install libibverbs)%s",
                    libraryFailure.get(), USE_TCP)));
        }
        VerbsLibrary.DeviceProbe p = probe.get();
        if (p.errno() == ENOSYS) {
            return Optional.of(new Cause(Reason.KERNEL_WITHOUT_RDMA,
                    "RDMA transport unavailable: ibv_get_device_list failed with ENOSYS: this kernel has"
                            + " no InfiniBand/RDMA verbs support (/sys/class/infiniband_verbs is missing;"
                            + " load ib_uverbs and the NIC driver, e.g. modprobe ib_uverbs mlx5_ib, or in a"
                            + " container pass /dev/infiniband through)" + USE_TCP));
        }
        if (!p.listed()) {
            return Optional.of(new Cause(Reason.DEVICE_LIST_FAILED,
                    "RDMA transport unavailable: " + p.message() + USE_TCP));
        }
        if (p.deviceCount() == 0) {
            return Optional.of(new Cause(Reason.NO_DEVICES,
                    "RDMA transport unavailable: libibverbs lists no RDMA devices (check the NIC driver"
                            + " with ibv_devices / ibv_devinfo and /sys/class/infiniband)" + USE_TCP));
        }
        return Optional.empty();
    }
}
