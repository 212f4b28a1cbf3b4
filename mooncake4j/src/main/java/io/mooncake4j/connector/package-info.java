/**
 * The vLLM-compatible connector: configuration ({@link io.mooncake4j.connector.MooncakeConnectorConfig}),
 * roles and exceptions, and the data shared by its scheduler and worker sides:
 * {@link io.mooncake4j.connector.KvTransferParams} (the {@code kv_transfer_params} keys),
 * {@link io.mooncake4j.connector.MooncakeConnectorMetadata} with
 * {@link io.mooncake4j.connector.PullReqMeta} (the per-step scheduler → worker message), and
 * {@link io.mooncake4j.connector.BlockIds} (per-group block-id arrays).
 *
 * <p>The scheduler side lives in {@code connector.scheduler}, the worker side in
 * {@code connector.worker}, the msgpack messages in {@code connector.wire}, the bootstrap HTTP
 * server and client in {@code connector.bootstrap}.
 *
 * <p><b>Thread-safety and ownership:</b> the configuration is immutable. The data classes are
 * not thread-safe: the scheduler thread builds a metadata object and hands it to the worker (a
 * happens-before hand-off); afterwards only the worker touches it. Block-id arrays are copied when
 * a data class is constructed and handed out without copying (read-only by convention), so that no
 * block id is boxed on the step path.
 */
package io.mooncake4j.connector;
