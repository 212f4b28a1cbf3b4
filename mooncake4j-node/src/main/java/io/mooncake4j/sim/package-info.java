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
 *       tensor-parallel rank; the loop's two halves are package-private classes beside it:
 *       {@code StepScheduler}, the scheduler side of a step (request queues, admission with the
 *       prefix cache and block reservation, aborts and stops, the update from the ranks' output,
 *       {@code requestFinished} and block freeing), and {@code ModelRunner}, the worker side on every
 *       rank ({@code startLoadKv}, the synthetic model's or a {@link io.mooncake4j.sim.StepModel}'s
 *       forward pass with the layer-wise hooks, results merged by the aggregator, connector stats);</li>
 *   <li>{@link io.mooncake4j.sim.SimProxy}: assigns {@code transfer_id}s and sends each request to a
 *       P engine ({@code do_remote_decode}, {@code max_tokens=1}) and a D engine
 *       ({@code do_remote_prefill}) concurrently;</li>
 *   <li>{@link io.mooncake4j.sim.ConnectorSimWorker}: a {@code SimWorker} over the real
 *       {@code MooncakeConnectorWorker} and a transfer engine;</li>
 *   <li>{@link io.mooncake4j.sim.DemoRunner}: what {@code bin/mooncake4j demo} runs.</li>
 * </ul>
 *
 * <p>The synthetic model picks its tokens by {@link io.mooncake4j.sim.SimEngine.Sampling}: from the
 * prompt's prefix hashes ({@code PROMPT}, the demo: D fails a request whose KV does not verify), or
 * also from a TP-independent digest of the prompt's KV bytes as this engine's cache holds them
 * ({@code KV}, {@code bin/mooncake4j serve}: a {@code kv_both} engine and a P→D pair give the same
 * tokens, a changed byte changes them). The worker factory of {@link io.mooncake4j.sim.ConnectorSimWorker}
 * tells each connector worker the model's KV-head count and MLA flag (the heterogeneous-TP math needs
 * them when TP exceeds the heads); TP sizes are validated against the heads as vLLM does
 * ({@link io.mooncake4j.memory.ModelPreset#kvHeadsPerRank}).
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
 * {@code StepScheduler}, {@code ModelRunner}, {@code BlockPool}, {@code TpOutputAggregator} and the
 * connector scheduler are owned by that thread (the step loop is the only one that calls them; the
 * few settings and diagnostics other threads touch are volatile).
 * Closing an engine stops its loop, closes its workers and frees its memory.
 */
package io.mooncake4j.sim;
