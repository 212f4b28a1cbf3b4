/**
 * The worker side of the connector, its front door: {@link io.mooncake4j.connector.worker.MooncakeConnectorWorker}
 * (vLLM's {@code MooncakeConnectorWorker}) and what an embedder names with it: its options
 * ({@link io.mooncake4j.connector.worker.MooncakeConnectorWorker.Builder},
 * {@link io.mooncake4j.connector.worker.SideChannelLimits}), its KV-cache registration
 * ({@link io.mooncake4j.connector.worker.RegistrationPlan}, {@link io.mooncake4j.connector.worker.KvRegistration}),
 * the per-step results ({@link io.mooncake4j.connector.worker.FinishedRequests},
 * {@link io.mooncake4j.connector.worker.KvConnectorTransferResults}), the transfer statistics
 * ({@link io.mooncake4j.connector.worker.MooncakeKvConnectorStats}), counters and health
 * ({@link io.mooncake4j.connector.worker.WorkerCounters}, {@link io.mooncake4j.connector.worker.WorkerHealth})
 * and its exceptions. Package-private here: the producer side the worker starts ({@code ProducerSide}:
 * ROUTER, send path, bootstrap server), the engine registration, the bounded calls into the loops.
 *
 * <p>The machinery lives in packages of its own, not exported: {@code connector.worker.send} (the
 * producer: the side-channel ROUTER and {@code send_kv_to_decode}), {@code connector.worker.receive}
 * (the consumer: the pulls and their DEALER connections), {@code connector.worker.loop} (what both sides'
 * loops share: the selector loop their ZMTP connections run on, the health monitor, the background
 * error log, per-wave timestamps) and {@code connector.worker.plan} (transfer planning, pure functions).
 *
 * <p><b>Threads and ownership.</b> The worker owns all of them; {@code close()} stops them all.
 * <ul>
 *   <li>P: {@code mooncake-p-listener-0} is the only thread that touches the ROUTER's connections;
 *       {@code mooncake-p-sender-0} (the sender loop) owns every piece of producer state
 *       ({@code reqs_need_send}, finished set, planner, descriptor buffer) and runs the send path
 *       as an asynchronous state machine (readiness futures, scheduled timeouts; it never blocks);
 *       {@code mooncake-p-xfer-<n>} ({@code num_workers} threads) run the blocking
 *       {@code batchTransferSyncWrite}, queue D's answer themselves when the write succeeded (it
 *       depends on the wave alone, so D need not wait for a hand-off to the sender loop) and post
 *       results back to the sender loop; {@code mooncake-bootstrap-http-<n>} serve the bootstrap
 *       server launched by TP rank 0.</li>
 *   <li>D: {@code mooncake-d-receiver-0} (the receiver loop) owns the consumer state (remote
 *       agents, bootstrap bookkeeping, the start of each pull); {@code mooncake-d-bootstrap-0} runs the
 *       blocking {@code /query} calls; {@code mooncake-d-io-0} owns every DEALER connection and records a
 *       pull's answers itself (under that pull's lock), so that {@code getFinished} sees a finished
 *       load as soon as its {@code FINISH} is read; the bootstrap thread posts back to the receiver
 *       loop. The finished and load-error queues are thread-safe.</li>
 * </ul>
 * The worker does not own the {@link io.mooncake4j.engine.TransferEngine} nor the KV-cache
 * memory: the caller closes those after the worker.
 *
 * <p><b>Bounds and watchdogs ({@code docs/reliability.md}).</b> What a side-channel peer can make a
 * worker spend is bounded by {@link io.mooncake4j.connector.worker.SideChannelLimits} (maximum ZMQ
 * message sizes on every ROUTER and DEALER, pending pulls and placeholders per D and in total, one D's
 * share of the transfer pool). Every loop thread is watched: a death is logged once, counted, and
 * either recovered (socket and loop recreated) or reported as unrecoverable in
 * {@link io.mooncake4j.connector.worker.MooncakeConnectorWorker#health()}. P never starts a write
 * after D may have abandoned the blocks, and a {@code kv_producer} never writes into its own engine's
 * memory (the rules are in {@code docs/differences-from-vllm.md}).
 *
 * <p><b>Layer-wise push (opt-in: {@code kv_connector_extra_config.layerwise_push}).</b>
 * {@code saveKvLayer} and {@code waitForSave} (the model runner's thread) only hand a task to the
 * sender loop, through one queue in call order with the step's metadata; the loop pairs each saved
 * layer of the step's prefill chunks with every D pull already there. With {@code transfer_thread_nice}
 * (0..19) the transfer-pool threads set that Linux nice value when they start (and the engine threads
 * they start inherit it), so that on a host whose cores are all busy the model runner keeps its core.
 *
 * <p><b>Thread-safety.</b> Value types here are immutable. {@code MooncakeConnectorWorker} is
 * driven by one caller thread (vLLM's worker main thread: {@code registerKvCaches},
 * {@code startLoadKv}, {@code getFinished}, …); {@code close()} and the accessors may be called
 * from any thread. The embedder's finished listener ({@code setFinishedListener}) runs on the thread
 * that made the event visible: {@code mooncake-d-io-0} or {@code mooncake-d-receiver-0} on D,
 * {@code mooncake-p-sender-0} on P (the expiry timer runs there too).
 */
package io.mooncake4j.connector.worker;
