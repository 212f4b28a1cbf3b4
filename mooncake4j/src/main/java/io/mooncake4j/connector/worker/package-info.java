/**
 * The worker side of the connector: {@link io.mooncake4j.connector.worker.MooncakeConnectorWorker}
 * (vLLM's {@code MooncakeConnectorWorker}), its KV-cache registration
 * ({@link io.mooncake4j.connector.worker.RegistrationPlan},
 * {@link io.mooncake4j.connector.worker.KvRegistration}), the producer's send path (side-channel
 * listener and {@code send_kv_to_decode}), the consumer's receive path, the per-step results
 * ({@link io.mooncake4j.connector.worker.FinishedRequests},
 * {@link io.mooncake4j.connector.worker.KvConnectorTransferResults}) and the transfer statistics
 * ({@link io.mooncake4j.connector.worker.MooncakeKvConnectorStats}). Transfer planning (pure
 * functions, no I/O) lives in the subpackage {@code plan}.
 *
 * <p><b>Threads and ownership.</b> The worker owns all of them; {@code close()} stops them all.
 * <ul>
 *   <li>P: {@code mooncake-p-listener-0} is the only thread that touches the ROUTER socket;
 *       {@code mooncake-p-sender-0} (the sender loop) owns every piece of producer state
 *       ({@code reqs_need_send}, finished set, planner, descriptor buffer) and runs the send path
 *       as an asynchronous state machine (readiness futures, scheduled timeouts; it never blocks);
 *       {@code mooncake-p-xfer-<n>} ({@code num_workers} threads) run the blocking
 *       {@code batchTransferSyncWrite}, queue D's answer themselves when the write succeeded (it
 *       depends on the wave alone; issue 13) and post results back to the sender loop;
 *       {@code mooncake-bootstrap-http-<n>} serve the bootstrap server launched by TP rank 0.</li>
 *   <li>D: {@code mooncake-d-receiver-0} (the receiver loop) owns the consumer state (remote
 *       agents, bootstrap bookkeeping, the start of each pull); {@code mooncake-d-bootstrap-0} runs the
 *       blocking {@code /query} calls; {@code mooncake-d-io-0} owns every DEALER socket and records a
 *       pull's answers itself (under that pull's lock), so that {@code getFinished} sees a finished
 *       load as soon as its {@code FINISH} is read; the bootstrap thread posts back to the receiver
 *       loop. The finished and load-error queues are thread-safe.</li>
 * </ul>
 * <b>Side-channel ZMTP.</b> The ROUTER ({@code SenderListener}) and the DEALER connections
 * ({@code PullChannels}) run on mooncake4j's own ZMTP 3.1 ({@code io.mooncake4j.internal.zmtp}):
 * the listener and {@code mooncake-d-io-0} own their connections and one NIO {@code Selector} each,
 * so a message crosses no other thread (issue 13). The wire is ZMTP 3, so either side talks to
 * libzmq, pyzmq and JeroMQ peers (JeroMQ, which the side channel used to run on, is now only a
 * test peer: {@code docs/performance.md}).
 * The worker does not own the {@link io.mooncake4j.engine.TransferEngine} nor the KV-cache
 * memory: the caller closes those after the worker.
 *
 * <p><b>Bounds and watchdogs (issue 9, {@code docs/reliability.md}).</b> What a side-channel peer can
 * make a worker spend is bounded by {@link io.mooncake4j.connector.worker.SideChannelLimits}
 * (maximum ZMQ message sizes on every ROUTER and DEALER, pending pulls and placeholders per D and in
 * total, one D's share of the transfer pool). Every loop thread is watched by
 * {@code HealthMonitor}: a death is logged once, counted, and either recovered (socket and loop
 * recreated) or reported as unrecoverable in
 * {@link io.mooncake4j.connector.worker.MooncakeConnectorWorker#health()}. P never starts a write
 * after D may have abandoned the blocks (the rule is in {@code docs/differences-from-vllm.md}).
 *
 * <p><b>Layer-wise push (issue 13, opt-in: {@code kv_connector_extra_config.layerwise_push}).</b>
 * {@code saveKvLayer} and {@code waitForSave} (the model runner's thread) only hand a task to the
 * sender loop, through one queue in call order with the step's metadata ({@code
 * KvSender.offerFromModelRunner}); a hook wakes the loop only when some layer-wise target has no
 * write in flight, else the first write's result runs the queue. The loop pairs each saved layer of the step's prefill chunks with every D pull already there
 * and hands its descriptors to the transfer pool under the same staleness check and per-D share as a
 * wave; a request is answered ({@code FINISH}/{@code CONTINUE}, unchanged messages) once its last
 * layer landed, or once a failed layer's request has nothing left in flight. A forward pass whose
 * step named no chunk posts nothing. With {@code transfer_thread_nice} (0..19) the transfer-pool
 * threads ({@code mooncake-p-xfer-<n>}) set that Linux nice value when they start, and the engine
 * threads they start (the TCP lanes) inherit it: on a host whose cores are all busy the model
 * runner keeps its core while a layer-wise push overlaps its prefill.
 *
 * <p><b>Per-wave timestamps.</b> {@code WaveTrace} ({@code -Dmooncake4j.waveTrace=true}, off by
 * default) records when a pull passes each step on both workers, for the breakdown the benchmarks
 * print ({@code docs/performance.md}, issue 13).
 *
 * <p><b>Thread-safety.</b> Value types here are immutable. {@code MooncakeConnectorWorker} is
 * driven by one caller thread (vLLM's worker main thread: {@code registerKvCaches},
 * {@code startLoadKv}, {@code getFinished}, …); {@code close()} and the accessors may be called
 * from any thread. {@link io.mooncake4j.connector.worker.ReplySink} is safe from any thread.
 * The embedder's finished listener ({@code setFinishedListener}) runs on the thread that made the
 * event visible: {@code mooncake-d-io-0} or {@code mooncake-d-receiver-0} on D,
 * {@code mooncake-p-sender-0} on P (the expiry timer runs there too).
 */
package io.mooncake4j.connector.worker;
