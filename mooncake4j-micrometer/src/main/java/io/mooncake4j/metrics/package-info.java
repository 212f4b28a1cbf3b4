/**
 * Micrometer meters for the connector and the engine, for embedders that have Micrometer
 * ({@code io.micrometer:micrometer-core}, an optional dependency: the module {@code requires static
 * micrometer.core}; nothing else in the library loads these classes, so it runs without the jar).
 *
 * <ul>
 *   <li>{@link io.mooncake4j.metrics.MooncakeConnectorMetrics}: the worker's transfer statistics
 *       ({@code getKvConnectorStats()}, vLLM's {@code MooncakeKVConnectorStats}) under vLLM's
 *       Prometheus names: {@code vllm:mooncake_xfer_time_seconds}, {@code vllm:mooncake_bytes_transferred},
 *       {@code vllm:mooncake_num_descriptors} (histograms), {@code vllm:mooncake_num_failed_transfers},
 *       {@code vllm:mooncake_num_failed_recvs}, {@code vllm:mooncake_num_kv_expired_reqs} (counters).</li>
 *   <li>{@link io.mooncake4j.metrics.MeteredTransferEngine}: a {@link io.mooncake4j.engine.TransferEngine}
 *       decorator counting what this side asks of any engine: transfers, bytes, failures, and the
 *       batch-capacity limit hit ({@code mooncake4j.engine.*}); and exposing the engine's own
 *       {@link io.mooncake4j.engine.TransferEngine#counters()} (rejected requests, closed
 *       connections, cap refusals, fallback and unroutable slices) as function counters.</li>
 * </ul>
 *
 * <p>Threads: meters are thread-safe; {@code record} is called by the embedder's step thread, the
 * decorator by whatever threads call the engine.
 */
package io.mooncake4j.metrics;
