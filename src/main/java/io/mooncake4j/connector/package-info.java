/**
 * The vLLM-compatible connector: configuration ({@link io.mooncake4j.connector.MooncakeConnectorConfig}),
 * roles and exceptions. The scheduler side lives in {@code connector.scheduler}, the worker side
 * in {@code connector.worker}, the msgpack messages in {@code connector.wire}, the bootstrap HTTP
 * server and client in {@code connector.bootstrap}.
 */
package io.mooncake4j.connector;
