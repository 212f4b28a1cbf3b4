/**
 * mooncake4j: a Java port of the Mooncake KV-cache transfer connector and transfer engine.
 *
 * <p>Exported packages form the embedder contract (each export below says what it is for);
 * everything else (transports, native bindings, wire messages, the bootstrap server) is private
 * to the module. The scripted engine for unit tests ({@code mooncake4j-testing}) and the Micrometer
 * meters ({@code mooncake4j-micrometer}) are artifacts of their own beside this one.
 *
 * <p>JCuda (optional, for {@code io.mooncake4j.memory.cuda}) is deliberately not required here:
 * its jars have no {@code Automatic-Module-Name}, so requiring them makes the build warn about
 * filename-based automodules. The cuda package reaches it on the class path through method
 * handles; see {@code docs/gpu.md}.
 */
module io.mooncake4j {
    requires org.slf4j;
    requires com.fasterxml.jackson.core;
    requires java.net.http;

    // What each export is for. Everything not exported (engine transports tcp/rdma/shm/handshake/
    // spi/core, connector.wire (the msgpack side-channel messages), connector.bootstrap (the
    // bootstrap HTTP server and client: vLLM's HTTP protocol is the contract, not these classes),
    // connector.worker.plan, internal) is private to the module; counts in docs/embedding.md.
    // Beside this module: mooncake4j-testing (the scripted engine), mooncake4j-micrometer (meters);
    // our nodes and tools (mooncake4j-node) are not part of the library.

    // MooncakeException and MooncakeConfigException: what the library throws
    exports io.mooncake4j;
    // KV-cache memory handed to the worker: storages, tensors, vLLM's KV cache config, host allocator
    exports io.mooncake4j.memory;
    // GPU memory through JCuda (optional jar): device storages, pinned host memory, availability probe
    exports io.mooncake4j.memory.cuda;
    // the transfer engine API (TransferEngine, TransferEngines.create, error and status codes)
    exports io.mooncake4j.engine;
    // vLLM's kv_transfer_config (MooncakeConnectorConfig), roles, kv_transfer_params, the step metadata
    exports io.mooncake4j.connector;
    // the scheduler-side hooks (get_num_new_matched_tokens, update_state_after_alloc, ...) of a step loop
    exports io.mooncake4j.connector.scheduler;
    // the worker: register_kv_caches, start_load_kv, get_finished, statistics, health, limits
    exports io.mooncake4j.connector.worker;

    // strict JSON for the Mooncake Store client's config and metadata (mooncake4j-store) and for the
    // node's HTTP bodies (mooncake4j-node: one bounded parser for all untrusted JSON), not for embedders
    exports io.mooncake4j.internal.json to io.mooncake4j.store, io.mooncake4j.node;
    // the node's tools (mooncake4j-node), not for embedders: byte formatting, the kernel's view of a
    // client's TCP connection (ClientWatch, serve's and the proxy's disconnect watch), shared memory
    // for `bench --shm`, thread tuning; they share the library's FFM bindings, so they live here
    exports io.mooncake4j.internal.sys to io.mooncake4j.node;
    // the bootstrap server and client, for the node's P side and its proxies (mooncake4j-node); vLLM's
    // HTTP protocol is the contract for everyone else, so this stays closed to embedders
    exports io.mooncake4j.connector.bootstrap to io.mooncake4j.node;
    // Mooncake's HTTP metadata store and the P2P handshake client, for the store client's segment
    exports io.mooncake4j.metadata to io.mooncake4j.store;
    exports io.mooncake4j.engine.handshake to io.mooncake4j.store;

    // engine kinds beyond the built-in ones (mooncake4j-testing provides "mock")
    uses io.mooncake4j.engine.EngineKindProvider;
    // the built-in kinds are providers too, so the exported engine package names nothing of the core
    provides io.mooncake4j.engine.EngineKindProvider with
            io.mooncake4j.engine.core.CoreEngineKinds.Tcp,
            io.mooncake4j.engine.core.CoreEngineKinds.Rdma,
            io.mooncake4j.engine.core.CoreEngineKinds.Shm,
            io.mooncake4j.engine.core.CoreEngineKinds.Auto,
            io.mooncake4j.engine.core.CoreEngineKinds.ShmDirect;

    // the transports, found by the engine core through their declarations (it names none); the same
    // list is in META-INF/services for the class path
    uses io.mooncake4j.engine.spi.TransportProvider;
    provides io.mooncake4j.engine.spi.TransportProvider with
            io.mooncake4j.engine.cudaipc.CudaIpcTransportProvider,
            io.mooncake4j.engine.shm.ShmTransportProvider,
            io.mooncake4j.engine.rdma.RdmaTransportProvider,
            io.mooncake4j.engine.tcp.TcpTransportProvider;
}
