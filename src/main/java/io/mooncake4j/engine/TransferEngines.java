package io.mooncake4j.engine;

import io.mooncake4j.engine.tcp.TcpTransferEngine;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.util.List;
import java.util.Locale;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "mock"} is the in-JVM {@link ScriptedTransferEngine}; {@code "tcp"} is
 * {@link TcpTransferEngine}, wire-compatible with Mooncake's TCP transport in P2P-handshake mode
 * and configured from Mooncake's {@code MC_*} environment variables.
 */
public final class TransferEngines {

    private TransferEngines() {}

    /** Kinds {@link #create} accepts. */
    public static List<String> kinds() {
        return List.of("mock", "tcp");
    }

    /** A new, uninitialised engine of {@code kind}. */
    public static TransferEngine create(String kind) {
        return switch (kind.toLowerCase(Locale.ROOT)) {
            case "mock" -> new ScriptedTransferEngine().copyData(true);
            case "tcp" -> new TcpTransferEngine();
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unknown engine kind '%s'; available: %s", kind, kinds()));
        };
    }
}
