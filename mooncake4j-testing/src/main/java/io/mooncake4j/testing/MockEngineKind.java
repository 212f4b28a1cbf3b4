package io.mooncake4j.testing;

import io.mooncake4j.engine.EngineKindProvider;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;

/**
 * Engine kind {@code "mock"} of {@code TransferEngines.create}: the scripted engine copying bytes in
 * the JVM and counting calls without keeping them (nodes, the demo and the benches run it for hours).
 * Not exported; found through {@link java.util.ServiceLoader}.
 */
public final class MockEngineKind implements EngineKindProvider {

    /** Called by {@link java.util.ServiceLoader}. */
    public MockEngineKind() {}

    @Override
    public String kind() {
        return "mock";
    }

    @Override
    public TransferEngine create() {
        return new ScriptedTransferEngine().copyData(true).recordCalls(false);
    }
}
