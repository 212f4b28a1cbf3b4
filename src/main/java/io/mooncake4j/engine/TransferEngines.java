package io.mooncake4j.engine;

import io.mooncake4j.engine.rdma.RdmaTransferEngine;
import io.mooncake4j.engine.tcp.TcpTransferEngine;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.util.List;
import java.util.Locale;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "mock"} is the in-JVM {@link ScriptedTransferEngine}; {@code "tcp"} is
 * {@link TcpTransferEngine}, wire-compatible with Mooncake's TCP transport in P2P-handshake mode
 * and configured from Mooncake's {@code MC_*} environment variables; {@code "rdma"} is
 * {@link RdmaTransferEngine} over libibverbs, wire-compatible with Mooncake's RDMA transport;
 * {@code "auto"} picks TCP or RDMA at {@code initialize} from its {@code protocol} argument
 * ({@code "tcp"}, {@code "rdma"}, or {@code "auto"}/{@code ""}: RDMA when a device is usable, else
 * TCP with one WARN).
 */
public final class TransferEngines {

    private TransferEngines() {}

    /** Kinds {@link #create} accepts. */
    public static List<String> kinds() {
        return List.of("mock", "tcp", "rdma", "auto");
    }

    /** A new, uninitialised engine of {@code kind}. */
    public static TransferEngine create(String kind) {
        return switch (kind.toLowerCase(Locale.ROOT)) {
            case "mock" -> new ScriptedTransferEngine().copyData(true);
            case "tcp" -> new TcpTransferEngine();
            case "rdma" -> new RdmaTransferEngine();
            case "auto" -> new ProtocolSelectingEngine();
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unknown engine kind '%s'; available: %s", kind, kinds()));
        };
    }

    /**
     * Why the last {@code initialize} of an engine made here failed, in words that name the cause
     * and the fix (for RDMA: no devices / ENOSYS / libibverbs missing, suggesting {@code "tcp"}),
     * or null when the engine keeps no such message. CLI commands print it and exit non-zero.
     */
    public static String lastError(TransferEngine engine) {
        return switch (engine) {
            case RdmaTransferEngine r -> r.lastError();
            case ProtocolSelectingEngine p -> p.lastError();
            default -> null;
        };
    }
}
