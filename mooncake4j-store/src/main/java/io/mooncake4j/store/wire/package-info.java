/**
 * The wire of Mooncake Store's master: struct_pack messages ({@link io.mooncake4j.store.wire.StructPack},
 * type literals and hashes in {@link io.mooncake4j.store.wire.SpType}) inside coro_rpc frames
 * ({@link io.mooncake4j.store.wire.CoroRpcClient}). Nothing here knows the master's types; those are in
 * {@code io.mooncake4j.store}. Internal to the module. Threads: see {@code CoroRpcClient}; the codec
 * classes are stateless or confined to one call.
 */
package io.mooncake4j.store.wire;
