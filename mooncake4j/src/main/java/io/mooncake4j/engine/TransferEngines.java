package io.mooncake4j.engine;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.ServiceLoader;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "tcp"} is the engine core
 * with the tcp transport only ({@link EngineBuilder#tcp()}), wire-compatible with Mooncake's TCP
 * transport in P2P-handshake mode; {@code "auto"}, {@code "rdma"} and {@code "shm"} are the engine
 * core with every transport (cuda-ipc, shm, rdma, tcp), of which {@code initialize}'s {@code protocol}
 * installs ({@code "tcp"}: tcp; {@code "rdma"}: rdma and tcp; {@code "shm"}: shm and tcp;
 * {@code "auto"}/{@code ""}: all that can run here, rdma only where a device is usable, cuda-ipc only
 * where an NVIDIA driver is) and
 * {@code MC_TRANSPORTS} restricts; each request then goes over the cheapest transport that
 * reaches its peer, falling back to the next on failure. All are configured from Mooncake's
 * {@code MC_*} environment variables. Further kinds come from {@link EngineKindProvider}s on the
 * path: with {@code mooncake4j-testing} present, {@code "mock"} is its in-JVM scripted engine.
 */
public final class TransferEngines {

    private TransferEngines() {}

    private static final List<String> BUILT_IN = List.of("tcp", "rdma", "shm", "auto");

    /** {@return the kinds {@link #create} accepts: those provided on the path, then the built-in ones} */
    public static List<String> kinds() {
        List<String> kinds = new ArrayList<>();
        for (EngineKindProvider p : Provided.ALL) {
            kinds.add(p.kind());
        }
        kinds.addAll(BUILT_IN);
        return List.copyOf(kinds);
    }

    /** The providers on the path, loaded once (a built-in kind cannot be replaced). */
    private static final class Provided {
        static final List<EngineKindProvider> ALL = ServiceLoader.load(EngineKindProvider.class).stream()
                .map(ServiceLoader.Provider::get)
                .filter(p -> !BUILT_IN.contains(p.kind()))
                .toList();
    }

    /**
     * Creates an engine; the caller owns it and must close it.
     *
     * @param kind one of {@link #kinds()}, in any case
     * @return a new, uninitialised engine of that kind
     * @throws TransferEngineException for an unknown kind
     */
    public static TransferEngine create(String kind) {
        return switch (kind.toLowerCase(Locale.ROOT)) {
            case "tcp" -> EngineBuilder.only("tcp");
            case "rdma", "shm", "auto" -> EngineBuilder.allTransports();
            default -> provided(kind.toLowerCase(Locale.ROOT));
        };
    }

    private static TransferEngine provided(String kind) {
        for (EngineKindProvider p : Provided.ALL) {
            if (p.kind().equals(kind)) {
                return p.create();
            }
        }
        throw new TransferEngineException(String.format(Locale.ROOT,
                "unknown engine kind '%s'; available: %s%s", kind, kinds(), kind.equals("mock")
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
        return engine instanceof CoreEngine c ? c.lastError() : null;
    }
}
