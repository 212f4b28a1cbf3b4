/**
 * mooncake4j: a Java port of the Mooncake KV-cache transfer connector and transfer engine.
 *
 * <p>Exported packages form the embedder contract; everything else (native bindings, wire
 * internals, JSON helpers) is private to the module.
 *
 * <p>JCuda (optional, for {@code io.mooncake4j.memory.cuda}) is deliberately not required here:
 * its jars have no {@code Automatic-Module-Name}, so requiring them makes the build warn about
 * filename-based automodules. The cuda package reaches it on the class path through method
 * handles; see {@code docs/gpu.md}.
 */
module io.mooncake4j {
    requires org.slf4j;
    requires org.zeromq.jeromq;
    requires java.net.http;
    requires jdk.httpserver;

    exports io.mooncake4j;
    exports io.mooncake4j.memory;
    exports io.mooncake4j.memory.cuda;
    exports io.mooncake4j.engine;
    exports io.mooncake4j.engine.testing;
    exports io.mooncake4j.connector;
    exports io.mooncake4j.connector.scheduler;
    exports io.mooncake4j.connector.wire;
    exports io.mooncake4j.connector.bootstrap;
    exports io.mooncake4j.connector.worker;
    exports io.mooncake4j.sim;
    exports io.mooncake4j.serve;
    exports io.mooncake4j.proxy;
}
