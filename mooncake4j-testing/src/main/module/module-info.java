/**
 * mooncake4j-testing: {@link io.mooncake4j.engine.testing.ScriptedTransferEngine}, a recording,
 * scriptable transfer engine with optional in-JVM byte copies for unit tests (no sockets), and the
 * engine kind {@code "mock"} of {@code TransferEngines.create}.
 */
module io.mooncake4j.testing {
    requires transitive io.mooncake4j;

    // ScriptedTransferEngine, EngineCall, EngineMethod
    exports io.mooncake4j.engine.testing;

    provides io.mooncake4j.engine.EngineKindProvider with io.mooncake4j.testing.MockEngineKind;
}
