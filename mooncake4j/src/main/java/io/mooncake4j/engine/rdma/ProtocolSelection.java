package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineException;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Resolves the {@code protocol} argument of {@code initialize} to the transport to install.
 * {@code "tcp"} and {@code "rdma"} are honoured explicitly (spec §4.1: the Java port differs from
 * Mooncake's Python binding here); {@code "rdma"} on a machine without RDMA fails with the
 * diagnosis. {@code "auto"}, {@code ""} or {@code null} behave like Mooncake's auto-discovery:
 * TCP when {@code MC_FORCE_TCP} is set, RDMA when a device survives the {@code device_name}
 * filter, else TCP with one WARN per JVM naming the cause.
 */
public final class ProtocolSelection {

    private static final Logger LOG = LoggerFactory.getLogger(ProtocolSelection.class);
    private static final AtomicBoolean WARNED = new AtomicBoolean();

    public static final String TCP = "tcp";
    public static final String RDMA = "rdma";

    private ProtocolSelection() {}

    /**
     * With this machine's RDMA availability and devices.
     *
     * @param forceTcp {@code MC_FORCE_TCP} ({@link RdmaEngineConfig#forceTcp()})
     */
    public static String resolve(String protocol, String deviceName, boolean forceTcp) {
        return resolve(protocol, deviceName, forceTcp, RdmaAvailability.unavailabilityCause(),
                () -> new VerbsRdmaProvider().deviceNames(), WARNED);
    }

    static String resolve(String protocol, String deviceName, boolean forceTcp,
                          Optional<RdmaAvailability.Cause> unavailable, Supplier<List<String>> devices,
                          AtomicBoolean warned) {
        String p = protocol == null ? "" : protocol.strip().toLowerCase(Locale.ROOT);
        switch (p) {
            case TCP -> {
                return TCP;
            }
            case RDMA -> {
                if (unavailable.isPresent()) {
                    throw new TransferEngineException(unavailable.get().message());
                }
                NicSelection.filter(devices.get(), deviceName); // throws naming unknown devices
                return RDMA;
            }
            case "", "auto" -> {
                if (forceTcp) {
                    return TCP;
                }
                String why;
                if (unavailable.isPresent()) {
                    why = unavailable.get().message();
                } else {
                    try {
                        NicSelection.filter(devices.get(), deviceName);
                        return RDMA;
                    } catch (TransferEngineException e) {
                        why = e.getMessage();
                    }
                }
                if (warned.compareAndSet(false, true)) {
                    LOG.warn("protocol '{}': no RDMA here, the other transports carry every transfer (tcp; shm between "
                            + "engines on this machine): {}", p.isEmpty() ? "auto" : p, why);
                }
                return TCP;
            }
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unsupported protocol '%s'; use \"tcp\", \"rdma\" or \"auto\"", protocol));
        }
    }
}
