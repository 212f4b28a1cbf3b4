/**
 * mooncake4j-node: our programs on top of the library ({@code bin/mooncake4j}: demo, bench, register,
 * serve, proxy, store, make-model), the reference serving engine behind them ({@code sim}), its HTTP
 * fronts ({@code http}, on Jetty 12) and the Jlama model ({@code model}). Not for embedding: it exports
 * nothing.
 *
 * <p>It reads the library through the library's exports, plus three packages the library exports to
 * this module only ({@code internal.json}, {@code internal.sys}, {@code connector.bootstrap}; the reason
 * for each is beside its export in the library's module-info). {@code LibraryFaceTest} checks that the
 * compiled classes use nothing else of the library.
 *
 * <p>What stays on the class path, and why: JCuda (its jars have no module name; the library reaches it
 * through method handles, docs/gpu.md), {@code jlama-native} (its name would derive to {@code jlama.native},
 * where {@code native} is a keyword; its classes share Jlama's package, so {@code bin/mooncake4j} patches
 * the jar into {@code jlama.core}), and the libraries that only Jlama and Micrometer use (automatic
 * modules read the class path). {@code bin/mooncake4j} and the tests run this module on the module path.
 */
module io.mooncake4j.node {
    requires io.mooncake4j;
    requires io.mooncake4j.store;
    requires io.mooncake4j.metrics;
    // engine kind "mock" for the demo and the benches (ScriptedTransferEngine)
    requires io.mooncake4j.testing;
    requires org.slf4j;
    // serve's and the proxy's HTTP server (io.mooncake4j.http); jetty-server requires http, io, util transitively
    requires org.eclipse.jetty.server;
    // GET /metrics in Prometheus text format (automatic module: Automatic-Module-Name in its manifest)
    requires micrometer.registry.prometheus;
    // the model (io.mooncake4j.model): Jlama 0.8.4 has no module name, so its jar's name gives it (automatic)
    requires jlama.core;
    // Jlama's ObjectMapper reads a checkpoint's config.json (JlamaModel); jackson-databind is a named module
    requires com.fasterxml.jackson.databind;
    // the proxy's and the demos' HTTP clients
    requires java.net.http;
}
