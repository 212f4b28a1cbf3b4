package io.mooncake4j.engine.core;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.spi.TransportDeclaration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * Which transports {@code initialize} installs, from its {@code protocol} argument (Mooncake's
 * meaning), the offered transports' declarations and {@code MC_TRANSPORTS}; no transport is named
 * here:
 * <ul>
 *   <li>a requestable transport's name ({@code "tcp"}, {@code "rdma"}, {@code "shm"}): that
 *       transport (required: where it cannot run, initialize fails with the diagnosis) and the
 *       companions beside it ({@code tcp}) for peers or buffers it cannot reach;</li>
 *   <li>{@code "auto"}, {@code ""}, null: every transport the engine offers that can run here
 *       (each factory's precheck decides: rdma only where a device is usable, as Mooncake's
 *       auto-discovery; cuda-ipc only where an NVIDIA driver is present).</li>
 * </ul>
 * {@code MC_TRANSPORTS} (a comma-separated list of names) restricts that set; naming away a
 * required transport fails. The result keeps the core's order of preference
 * ({@link TransportLoader#ORDER}).
 *
 * @param required installed or initialize fails
 * @param optional installed where they can run, skipped (logged) where they cannot
 * @param order    the offered transports' names in the core's order
 */
record TransportPlan(List<String> required, List<String> optional, List<String> order) {

    /** The environment variable restricting the set. */
    static final String RESTRICT = "MC_TRANSPORTS";

    /** Every name to install, in the core's order. */
    List<String> all() {
        List<String> out = new ArrayList<>();
        for (String n : order) {
            if (required.contains(n) || optional.contains(n)) {
                out.add(n);
            }
        }
        return out;
    }

    /**
     * @param offered the declarations of the transports this engine can install (an engine with one
     *                transport offers fewer)
     * @param known   every declaration the library knows (the providers'), for names an engine
     *                does not offer
     * @throws TransferEngineException naming the problem and the fix
     */
    static TransportPlan resolve(String protocol, List<TransportDeclaration> offered,
            List<TransportDeclaration> known, Map<String, String> env) {
        Map<String, TransportDeclaration> all = new LinkedHashMap<>();
        for (TransportDeclaration d : known) {
            all.put(d.name(), d);
        }
        List<TransportDeclaration> sorted = new ArrayList<>(offered);
        sorted.sort(TransportLoader.ORDER);
        for (TransportDeclaration d : sorted) {
            all.put(d.name(), d);
        }
        List<TransportDeclaration> byOrder = new ArrayList<>(all.values());
        byOrder.sort(TransportLoader.ORDER);
        List<String> order = sorted.stream().map(TransportDeclaration::name).toList();
        Set<String> names = byOrder.stream().map(TransportDeclaration::name)
                .collect(Collectors.toCollection(LinkedHashSet::new));

        String p = protocol == null ? "" : protocol.strip().toLowerCase(Locale.ROOT);
        List<String> required = new ArrayList<>();
        List<String> optional = new ArrayList<>();
        if (p.isEmpty() || p.equals("auto")) {
            optional.addAll(order);
        } else {
            TransportDeclaration d = all.get(p);
            if (d == null || !d.requestable()) {
                String choices = byOrder.stream().filter(TransportDeclaration::requestable)
                        .map(x -> "\"" + x.name() + "\"").collect(Collectors.joining(", "));
                throw new TransferEngineException(String.format(Locale.ROOT,
                        "unsupported protocol '%s'; use %s or \"auto\"", protocol, choices));
            }
            if (!order.contains(p)) {
                throw new TransferEngineException(String.format(Locale.ROOT,
                        "protocol \"%s\" is not served by this engine (it offers %s); create the engine with "
                                + "TransferEngines.create(\"%s\") or TransferEngines.create(\"auto\")", p, order, p));
            }
            required.add(p);
            for (TransportDeclaration o : sorted) {
                if (o.companion()) {
                    optional.add(o.name());
                }
            }
        }
        String restrict = env.get(RESTRICT);
        if (restrict != null && !restrict.isBlank()) {
            Set<String> allowed = new LinkedHashSet<>();
            for (String s : restrict.split(",")) {
                String n = s.strip().toLowerCase(Locale.ROOT);
                if (!names.contains(n)) {
                    throw new TransferEngineException(String.format(Locale.ROOT,
                            "%s=%s names unknown transport '%s'; known: %s", RESTRICT, restrict, n, names));
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
                    "no transport left to install (offered %s, %s=%s)", order, RESTRICT, restrict));
        }
        return new TransportPlan(List.copyOf(required), List.copyOf(optional), order);
    }
}
