/**
 * The consumer's machinery (not exported): {@link io.mooncake4j.connector.worker.receive.KvReceiver}
 * (vLLM's {@code receive_kv} and its bookkeeping: remote agents, bootstrap queries, the start and end
 * of each pull) and {@link io.mooncake4j.connector.worker.receive.PullChannels} (the DEALER connections
 * a pull is sent and answered on, with their retries, probes and connection cap).
 *
 * <p><b>Threads.</b> {@code mooncake-d-receiver-0} (the receiver loop) owns the consumer state;
 * {@code mooncake-d-bootstrap-0} runs the blocking {@code /query} calls and posts back to it;
 * {@code mooncake-d-io-0} runs the DEALERs on the shared
 * {@link io.mooncake4j.connector.worker.loop.SelectorLoop}, owns every connection and records a pull's
 * answer itself, so that a finished load is visible the moment its {@code FINISH} is read.
 */
package io.mooncake4j.connector.worker.receive;
