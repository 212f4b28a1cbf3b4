package io.mooncake4j.engine;

import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.util.List;
import java.util.Locale;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "mock"} is the in-JVM {@link ScriptedTransferEngine}. Real transports are chosen by the
 * {@code protocol} argument of {@link TransferEngine#initialize}.
 */
public final class TransferEngines {

    private TransferEngines() {}

    /** Kinds {@link #create} accepts. */
    public static List<String> kinds() {
        return List.of("mock");
    }

    /** A new, uninitialised engine of {@code kind}. */
    public static TransferEngine create(String kind) {
        return switch (kind.toLowerCase(Locale.ROOT)) {
            case "mock" -> new ScriptedTransferEngine().copyData(true);
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unknown engine kind '%s'; available: %s", kind, kinds()));
        };
    }
}
