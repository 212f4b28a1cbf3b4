/**
 * mooncake4j: a Java port of the Mooncake KV-cache transfer connector and transfer engine.
 *
 * <p>Exported packages form the embedder contract (each export below says what it is for);
 * everything else (transports, native bindings, wire messages, the bootstrap server, the
 * reference embedding {@code sim}, the command-line tools) is private to the module.
 *
 * <p>JCuda (optional, for {@code io.mooncake4j.memory.cuda}) is deliberately not required here:
 * its jars have no {@code Automatic-Module-Name}, so requiring them makes the build warn about
 * filename-based automodules. The cuda package reaches it on the class path through method
 * handles; see {@code docs/gpu.md}.
 */
module io.mooncake4j {
    requires org.slf4j;
    requires com.fasterxml.jackson.core;
    // optional: only io.mooncake4j.metrics uses it, and nothing else loads that package
    requires static transitive micrometer.core;
    // optional: `serve` answers GET /metrics in Prometheus text format when it is present
    requires static micrometer.registry.prometheus;
    requires java.net.http;
    requires jdk.httpserver;
    // the node's model runtime (io.mooncake4j.model, not exported; the library packages never load it):
    // Jlama's jar has no Automatic-Module-Name, so this is its file-name module; its tensors are typed
    // over the incubating Vector API
    requires jlama.core;
    requires jdk.incubator.vector;

    // What each export is for. Everything not exported (engine transports tcp/rdma/shm/handshake/
    // spi/internal, connector.wire (the msgpack side-channel messages), connector.bootstrap (the
    // bootstrap HTTP server and client: vLLM's HTTP protocol is the contract, not these classes),
    // connector.worker.plan, sim (the reference embedding behind `bin/mooncake4j demo`), serve,
    // proxy, cli, internal) is private to the module; counts in docs/embedding.md.

    // MooncakeException and MooncakeConfigException: what the library throws
    exports io.mooncake4j;
    // KV-cache memory handed to the worker: storages, tensors, vLLM's KV cache config, host allocator
    exports io.mooncake4j.memory;
    // GPU memory through JCuda (optional jar): device storages, pinned host memory, availability probe
    exports io.mooncake4j.memory.cuda;
    // the transfer engine API (TransferEngine, TransferEngines.create, error and status codes)
    exports io.mooncake4j.engine;
    // ScriptedTransferEngine: a recording, scriptable engine for embedders' unit tests (no sockets)
    exports io.mooncake4j.engine.testing;
    // vLLM's kv_transfer_config (MooncakeConnectorConfig), roles, kv_transfer_params, the step metadata
    exports io.mooncake4j.connector;
    // the scheduler-side hooks (get_num_new_matched_tokens, update_state_after_alloc, ...) of a step loop
    exports io.mooncake4j.connector.scheduler;
    // the worker: register_kv_caches, start_load_kv, get_finished, statistics, health, limits
    exports io.mooncake4j.connector.worker;
    // Micrometer meters under vLLM's names (needs micrometer-core, optional; docs/embedding.md)
    exports io.mooncake4j.metrics;
}
