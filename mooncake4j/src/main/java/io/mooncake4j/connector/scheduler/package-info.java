/**
 * The scheduler side of the Mooncake connector: {@link io.mooncake4j.connector.scheduler.MooncakeConnectorScheduler}
 * (vLLM's {@code MooncakeConnectorScheduler}) and the small views the embedder implements for it —
 * {@link io.mooncake4j.connector.scheduler.Request} (one request) and
 * {@link io.mooncake4j.connector.scheduler.KvCacheBlocks} (its allocated blocks).
 *
 * <p>Pure Java: no native memory, no sockets, no threads. <b>Thread-safety:</b> none; everything
 * here is confined to the embedder's single scheduler thread, as in vLLM. The metadata it builds
 * ({@link io.mooncake4j.connector.MooncakeConnectorMetadata}) is handed to the workers.
 *
 * <p><b>Ownership:</b> block-id arrays passed in are never modified and are copied when kept;
 * request params maps are the requests' own and are written to ({@code do_remote_prefill},
 * and {@code do_remote_decode} under the collision guard).
 */
package io.mooncake4j.connector.scheduler;
