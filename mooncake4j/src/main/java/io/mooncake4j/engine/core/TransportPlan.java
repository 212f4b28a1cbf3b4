package io.mooncake4j.engine.core;

import io.mooncake4j.engine.TransferEngineException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Which transports {@code initialize} installs, from its {@code protocol} argument (Mooncake's
 * meaning) and {@code MC_TRANSPORTS}:
 * <ul>
 *   <li>{@code "tcp"}: tcp only;</li>
 *   <li>{@code "rdma"}: rdma (required: where it cannot run, initialize fails with the diagnosis),
 *       and tcp beside it for peers or buffers rdma cannot reach;</li>
 *   <li>{@code "shm"}: shm (required) and tcp;</li>
 *   <li>{@code "auto"}, {@code ""}, null: every transport the engine offers that can run here
 *       (rdma only where a device is usable, as Mooncake's auto-discovery; one WARN otherwise;
 *       cuda-ipc only where an NVIDIA driver is present).</li>
 * </ul>
 * {@code MC_TRANSPORTS} (a comma-separated list of names) restricts that set; naming away a
 * required transport fails. The result keeps the core's order of preference ({@link #ORDER}).
 *
 * @param required installed or initialize fails
 * @param optional installed where they can run, skipped (logged) where they cannot
 */
record TransportPlan(List<String> required, List<String> optional) {

    /**
     * The order of preference: cheapest first ({@code cuda-ipc} moves GPU memory only, {@code shm}
     * host memory only, both on one machine); tcp last (its failures are final, see SliceGroup).
     */
    static final List<String> ORDER = List.of("cuda-ipc", "shm", "rdma", "tcp");
    /** The environment variable restricting the set. */
    static final String RESTRICT = "MC_TRANSPORTS";

    /** Every name, required first-come, in {@link #ORDER}. */
    List<String> all() {
        List<String> out = new ArrayList<>();
        for (String n : ORDER) {
            if (required.contains(n) || optional.contains(n)) {
                out.add(n);
            }
        }
        return out;
    }

    /**
     * @param offered the transports this engine can install (an engine with one transport offers fewer)
     * @throws TransferEngineException naming the problem and the fix
     */
    static TransportPlan resolve(String protocol, Set<String> offered, Map<String, String> env) {
        String p = protocol == null ? "" : protocol.strip().toLowerCase(Locale.ROOT);
        List<String> required = new ArrayList<>();
        List<String> optional = new ArrayList<>();
        switch (p) {
            case "tcp" -> required.add("tcp");
            case "rdma", "shm" -> {
                required.add(p);
                optional.add("tcp");
            }
            case "", "auto" -> optional.addAll(ORDER);
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unsupported protocol '%s'; use \"tcp\", \"rdma\", \"shm\" or \"auto\"", protocol));
        }
        for (String r : required) {
            if (!offered.contains(r)) {
                throw new TransferEngineException(String.format(Locale.ROOT,
                        "protocol \"%s\" is not served by this engine (it offers %s); create the engine with "
                                + "TransferEngines.create(\"%s\") or TransferEngines.create(\"auto\")", r, offered, r));
            }
        }
        optional.retainAll(offered);
        String restrict = env.get(RESTRICT);
        if (restrict != null && !restrict.isBlank()) {
            Set<String> allowed = new LinkedHashSet<>();
            for (String s : restrict.split(",")) {
                String n = s.strip().toLowerCase(Locale.ROOT);
                if (!ORDER.contains(n)) {
                    throw new TransferEngineException(String.format(Locale.ROOT,
                            "%s=%s names unknown transport '%s'; known: %s", RESTRICT, restrict, n, ORDER));
                }
                allowed.add(n);
            }
            for (String r : required) {
                if (!allowed.contains(r)) {
                    throw new TransferEngineException(String.format(Locale.ROOT,
                            "protocol \"%s\" needs transport %s, which %s=%s excludes", p, r, RESTRICT, restrict));
                }
            }
            optional.retainAll(allowed);
        }
        optional.removeAll(required);
        if (required.isEmpty() && optional.isEmpty()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "no transport left to install (offered %s, %s=%s)", offered, RESTRICT, restrict));
        }
        return new TransportPlan(List.copyOf(required), List.copyOf(optional));
    }
}
