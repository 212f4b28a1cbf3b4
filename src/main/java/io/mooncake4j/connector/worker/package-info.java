/**
 * The worker side of the connector (vLLM's {@code MooncakeConnectorWorker}): KV-cache
 * registration, the P sender and D receiver loops, transfer planning and
 * {@link io.mooncake4j.connector.worker.MooncakeKvConnectorStats}. Each class states its own
 * thread-safety; loop state is confined to the loop's thread.
 */
package io.mooncake4j.connector.worker;
