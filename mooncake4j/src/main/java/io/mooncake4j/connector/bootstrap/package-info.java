/**
 * vLLM's Mooncake bootstrap HTTP rendezvous: {@link io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer}
 * (run by one P worker per engine group), {@link io.mooncake4j.connector.bootstrap.BootstrapClient}
 * ({@code POST /register} from P workers, {@code GET /query} from D workers), the payload and
 * answer records, and {@link io.mooncake4j.connector.bootstrap.BootstrapAddresses} (who launches
 * the server, where P registers).
 *
 * <p>Ownership: the worker that launches the server owns and closes it; each worker owns its
 * client. Thread-safety: server and client are thread-safe; records are immutable.
 */
package io.mooncake4j.connector.bootstrap;
