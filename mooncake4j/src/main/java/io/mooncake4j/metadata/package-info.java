/**
 * Mooncake's metadata store, the alternative to the P2P handshake: a key-value service where each
 * transfer engine publishes its segment descriptor ({@code mooncake/ram/<segment>}) and where its
 * RPC address is found ({@code mooncake/rpc_meta/<segment>}), in the same keys and JSON as
 * Mooncake's C++ engine ({@code transfer_metadata.cpp}). {@link io.mooncake4j.metadata.MetadataStore}
 * is the storage abstraction, {@link io.mooncake4j.metadata.HttpMetadataStore} the HTTP form
 * ({@code http://host:port/metadata}, e.g. {@code mooncake_master --enable_http_metadata_server}),
 * and {@link io.mooncake4j.metadata.SegmentMetadata} publishes, withdraws and looks up segments.
 * Used by the store client; independent of the engine's internals so that an engine can use it
 * too. Threads: none of its own; every class is thread-safe and every call blocks the caller for
 * at most its timeouts.
 */
package io.mooncake4j.metadata;
