/**
 * The reference embedding of mooncake4j: a small serving engine that drives the Mooncake
 * connector the way vLLM's scheduler and model runner do, with a synthetic model whose KV bytes
 * can be verified end to end, and a proxy like vLLM's example disaggregated-serving proxy.
 *
 * <ul>
 *   <li>{@link io.mooncake4j.sim.SimEngine}: the step loop (schedule → {@code buildConnectorMeta}
 *       → {@code startLoadKv} → forward → {@code getTransferResults} → free), one
 *       {@link io.mooncake4j.sim.BlockPool} per KV group with prefix caching, and one
 *       {@link io.mooncake4j.sim.SimWorker} and {@link io.mooncake4j.sim.SyntheticModel} per
 *       tensor-parallel rank;</li>
 *   <li>{@link io.mooncake4j.sim.SimProxy}: assigns {@code transfer_id}s and sends each request to a
 *       P engine ({@code do_remote_decode}, {@code max_tokens=1}) and a D engine
 *       ({@code do_remote_prefill}) concurrently;</li>
 *   <li>{@link io.mooncake4j.sim.ConnectorSimWorker}: a {@code SimWorker} over the real
 *       {@code MooncakeConnectorWorker} and a transfer engine;</li>
 *   <li>{@link io.mooncake4j.sim.DemoRunner}: what {@code bin/mooncake4j demo} runs.</li>
 * </ul>
 *
 * <p>Exported so that embedders can read it as a worked example of the connector contract and
 * reuse it to test their own deployment; it is not a production inference server.
 *
 * <p>KV caches live in host memory or, with {@link io.mooncake4j.sim.SimEngine.KvPlacement#gpu}, in
 * GPU memory that the synthetic model writes and verifies through bulk copies
 * ({@code bin/mooncake4j demo --device cuda}).
 *
 * <p><b>Threading and ownership:</b> each engine owns its KV memory, workers and one step-loop
 * thread; requests may be submitted from any thread, everything else runs on the step loop.
 * {@code BlockPool}, {@code TpOutputAggregator} and the scheduler are confined to that thread.
 * Closing an engine stops its loop, closes its workers and frees its memory.
 */
package io.mooncake4j.sim;
