/**
 * A Java client of Mooncake Store ({@code mooncake_master}): {@link io.mooncake4j.store.MooncakeStoreClient}
 * (the pool as Mooncake's Python {@code MooncakeDistributedStore} offers it), its configuration
 * {@link io.mooncake4j.store.StoreConfig} ({@code mooncake.json} keys), {@link io.mooncake4j.store.ReplicateConfig},
 * and {@link io.mooncake4j.store.MasterClient} (one typed method per master RPC). The wire is in
 * {@code io.mooncake4j.store.wire} (not exported). This is the artifact {@code mooncake4j-store}; threads: each client has a liveness thread and
 * the master connection's threads; every public method is thread-safe.
 */
package io.mooncake4j.store;
