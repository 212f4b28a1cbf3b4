package io.mooncake4j.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.ServiceLoader;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "tcp"} is the engine core
 * with the tcp transport only, wire-compatible with Mooncake's TCP
 * transport in P2P-handshake mode; {@code "auto"}, {@code "rdma"} and {@code "shm"} are the engine
 * core with every transport (cuda-ipc, shm, rdma, tcp), of which {@code initialize}'s {@code protocol}
 * installs ({@code "tcp"}: tcp; {@code "rdma"}: rdma and tcp; {@code "shm"}: shm and tcp;
 * {@code "auto"}/{@code ""}: all that can run here, rdma only where a device is usable, cuda-ipc only
 * where an NVIDIA driver is) and
 * {@code MC_TRANSPORTS} restricts; each request then goes over the cheapest transport that
 * reaches its peer, falling back to the next on failure. All are configured from Mooncake's
 * {@code MC_*} environment variables. Further kinds come from {@link EngineKindProvider}s on the
 * path: with {@code mooncake4j-testing} present, {@code "mock"} is its in-JVM scripted engine.
 * {@code "shm-direct"} is the engine core with the shm transport alone (no fallback: a peer on
 * another machine, or a buffer shm cannot reach, fails its transfer), to measure shm by itself.
 * The built-in kinds are {@link EngineKindProvider}s too, registered by the library itself
 * ({@code engine.core.CoreEngineKinds}), so this package names nothing of the engine core.
 */
public final class TransferEngines {

    private TransferEngines() {}

    private static final List<String> BUILT_IN = List.of("tcp", "rdma", "shm", "auto", "shm-direct");

    /** {@return the kinds {@link #create} accepts: those provided on the path, then the built-in ones} */
    public static List<String> kinds() {
        List<String> kinds = new ArrayList<>();
        for (EngineKindProvider p : Provided.OTHERS) {
            kinds.add(p.kind());
        }
        kinds.addAll(BUILT_IN);
        return List.copyOf(kinds);
    }

    /**
     * The providers on the path, loaded once: the library's own for the built-in kinds, and the
     * others (a built-in kind cannot be replaced).
     */
    private static final class Provided {
        static final List<EngineKindProvider> ALL = ServiceLoader.load(EngineKindProvider.class).stream()
                .map(ServiceLoader.Provider::get)
                .toList();
        static final List<EngineKindProvider> BUILT = ALL.stream()
                .filter(p -> BUILT_IN.contains(p.kind()) && ownClass(p.getClass()))
                .toList();
        static final List<EngineKindProvider> OTHERS = ALL.stream()
                .filter(p -> !BUILT_IN.contains(p.kind()))
                .toList();


        /** Whether {@code c} comes from this library (its module, or on the class path its jar). */
        private static boolean ownClass(Class<?> c) {
            Module mine = TransferEngines.class.getModule();
            if (mine.isNamed()) {
                return c.getModule() == mine;
            }
            var own = TransferEngines.class.getProtectionDomain().getCodeSource();
            var theirs = c.getProtectionDomain().getCodeSource();
            return own != null && theirs != null && Objects.equals(own.getLocation(), theirs.getLocation());
        }
    }

    /**
     * Creates an engine; the caller owns it and must close it.
     *
     * @param kind one of {@link #kinds()}, in any case
     * @return a new, uninitialised engine of that kind
     * @throws TransferEngineException for an unknown kind
     */
    public static TransferEngine create(String kind) {
        String k = kind.toLowerCase(Locale.ROOT);
        for (EngineKindProvider p : BUILT_IN.contains(k) ? Provided.BUILT : Provided.OTHERS) {
            if (p.kind().equals(k)) {
                return p.create();
            }
        }
        if (BUILT_IN.contains(k)) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "the library's engine kind '%s' is not registered: its META-INF/services/%s is missing "
                            + "from the class path (a shaded jar must merge services files)", k,
                    EngineKindProvider.class.getName()));
        }
        throw new TransferEngineException(String.format(Locale.ROOT,
                "unknown engine kind '%s'; available: %s%s", kind, kinds(), k.equals("mock")
                        ? " (\"mock\" is the scripted engine of io.mooncake4j:mooncake4j-testing, not on the path)"
                        : ""));
    }

    /**
     * Why the last {@code initialize} of an engine made here failed, in words that name the cause
     * and the fix (for RDMA: no devices / ENOSYS / libibverbs missing, suggesting {@code "tcp"}),
     * or null when the engine keeps no such message. CLI commands print it and exit non-zero.
     *
     * @param engine an engine made by {@link #create}
     * @return the message of the last failed {@code initialize}, or null
     */
    public static String lastError(TransferEngine engine) {
        for (EngineKindProvider p : Provided.ALL) {
            String m = p.lastError(engine);
            if (m != null) {
                return m;
            }
        }
        return null;
    }
}
