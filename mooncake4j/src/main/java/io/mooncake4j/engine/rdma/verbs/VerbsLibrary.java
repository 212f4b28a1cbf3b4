package io.mooncake4j.engine.rdma.verbs;

import java.util.LinkedHashSet;
import java.util.Optional;
import java.util.Set;

/**
 * What the RDMA transport may ask about libibverbs without touching the raw layer: whether the
 * library is usable, its optional capabilities, and a device-list probe that reports errno
 * instead of throwing.
 */
public final class VerbsLibrary {

    private VerbsLibrary() {}

    /**
     * Outcome of {@link #probeDevices()}: a device count, or the errno of a failed list.
     *
     * @param deviceCount devices listed
     * @param errno       the errno of a failed list, 0 otherwise
     * @param message     why the library could not be used, or null
     */
    public record DeviceProbe(int deviceCount, int errno, String message) {
        public boolean listed() {
            return errno == 0 && message == null;
        }
    }

    public static String libraryName() {
        return Verbs.LIBRARY;
    }

    public static boolean nativeAccessEnabled() {
        return Verbs.NATIVE_ACCESS_ENABLED;
    }

    /** Why libibverbs cannot be used (not loadable, symbols missing, native access off); empty when usable. */
    public static Optional<String> unavailability() {
        return Verbs.unavailable();
    }

    /** Optional verbs found in the loaded library: {@code ibv_reg_mr_iova2}, {@code ibv_reg_dmabuf_mr}, {@code ibv_query_gid_ex}. */
    public static Set<String> capabilities() {
        Set<String> s = new LinkedHashSet<>();
        if (Verbs.HAS_REG_MR_IOVA2) {
            s.add("ibv_reg_mr_iova2");
        }
        if (Verbs.HAS_REG_DMABUF_MR) {
            s.add("ibv_reg_dmabuf_mr");
        }
        if (Verbs.HAS_QUERY_GID_EX) {
            s.add("ibv_query_gid_ex");
        }
        return s;
    }

    /** Lists devices once and frees the list. Requires {@link #unavailability()} to be empty. */
    public static DeviceProbe probeDevices() {
        try (IbvDeviceList list = IbvDeviceList.get()) {
            return new DeviceProbe(list.devices().size(), 0, null);
        } catch (VerbsException e) {
            return new DeviceProbe(0, e.errno(), e.getMessage());
        }
    }
}
