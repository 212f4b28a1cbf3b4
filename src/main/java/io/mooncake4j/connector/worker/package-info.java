/**
 * The worker side of the connector: {@link io.mooncake4j.connector.worker.MooncakeConnectorWorker}
 * (vLLM's {@code MooncakeConnectorWorker}), its KV-cache registration
 * ({@link io.mooncake4j.connector.worker.RegistrationPlan},
 * {@link io.mooncake4j.connector.worker.KvRegistration}) and the producer's side-channel listener
 * ({@link io.mooncake4j.connector.worker.SideChannelHandler}), and the transfer statistics
 * ({@link io.mooncake4j.connector.worker.MooncakeKvConnectorStats}). Transfer planning (pure
 * functions, no I/O) lives in the module-private subpackage {@code plan}.
 *
 * <p><b>Ownership.</b> The worker owns its ZMQ context, the listener thread
 * ({@code mooncake-p-listener-0}, the only thread that touches the ROUTER socket) and the sender-loop
 * thread ({@code mooncake-p-sender-0}, where all producer-side state is confined). It does not own
 * the {@link io.mooncake4j.engine.TransferEngine} nor the KV-cache memory: the caller closes those
 * after the worker.
 *
 * <p><b>Thread-safety.</b> Value types here are immutable. {@code MooncakeConnectorWorker} is driven
 * by one caller thread (vLLM's worker main thread); {@code close()} and the accessors may be called
 * from any thread. {@link io.mooncake4j.connector.worker.ReplySink} is safe from any thread.
 */
package io.mooncake4j.connector.worker;
