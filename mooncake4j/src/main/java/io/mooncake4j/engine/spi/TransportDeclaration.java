package io.mooncake4j.engine.spi;

import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * What a transport states about itself so that the core can order, choose and fall back among
 * transports without naming any of them ({@link TransportProvider#declaration()}).
 *
 * @param name        the protocol name: what {@code MC_TRANSPORTS}, logs and {@link Transport#name()}
 *                    use, and {@code initialize}'s {@code protocol} when {@code requestable};
 *                    lower case letters, digits and {@code -}; never {@code "auto"}
 * @param memory      the memory kinds it can reach on either side; its
 *                    {@link Transport#capabilities()} never claim more
 * @param preference  its place in the core's order: lower is tried first, ties by name. Cheap,
 *                    narrow transports come first (cuda-ipc 10, shm 20), then rdma (30), then tcp (90);
 *                    a retryable failure moves a slice to the next capable transport in this order
 * @param requestable whether {@code initialize}'s {@code protocol} may name it (then it is required:
 *                    where it cannot run, initialize fails with its diagnosis)
 * @param companion   whether it is installed beside a requested transport, for the peers and
 *                    buffers that one cannot reach (tcp)
 */
public record TransportDeclaration(String name, Set<MemoryKind> memory, int preference, boolean requestable,
        boolean companion) {

    private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9-]{0,31}");

    public TransportDeclaration {
        Objects.requireNonNull(name, "name");
        if (!NAME.matcher(name).matches() || name.equals("auto")) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "transport name '%s': use 1 to 32 lower case letters, digits or '-', not \"auto\"", name));
        }
        memory = Set.copyOf(Objects.requireNonNull(memory, "memory"));
        if (memory.isEmpty()) {
            throw new IllegalArgumentException("transport " + name + " declares no memory it can reach");
        }
    }

    /** Whether {@code capabilities} stay within the declared memory (a transport claiming more is a bug). */
    public boolean covers(TransportCapabilities capabilities) {
        return memory.containsAll(capabilities.localKinds()) && memory.containsAll(capabilities.remoteKinds());
    }
}
