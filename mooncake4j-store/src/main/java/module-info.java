/**
 * mooncake4j-store: a client of Mooncake Store, the distributed KV pool that vLLM, SGLang and LMCache
 * fleets share. {@link io.mooncake4j.store.MooncakeStoreClient} has the semantics of Mooncake's Python
 * {@code MooncakeDistributedStore}; its segment and its data path are the library's transfer engine.
 * The master's wire (struct_pack bodies in coro_rpc frames, {@code io.mooncake4j.store.wire}) is private.
 */
module io.mooncake4j.store {
    requires transitive io.mooncake4j;
    requires org.slf4j;
    // TCP keepalive timings of the master connection
    requires jdk.net;

    // MooncakeStoreClient, StoreConfig, ReplicateConfig, MasterClient, results and error codes
    exports io.mooncake4j.store;
    // the store connector: vLLM's MooncakeStoreConnector keys (block hash, namespaces), lookup, load, save
    exports io.mooncake4j.store.connector;
}
