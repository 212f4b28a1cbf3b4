/**
 * mooncake4j-micrometer: Micrometer meters for the connector's statistics under vLLM's
 * {@code vllm:mooncake_*} names and a metered {@code TransferEngine} decorator.
 */
module io.mooncake4j.metrics {
    requires transitive io.mooncake4j;
    requires transitive micrometer.core;

    // MooncakeConnectorMetrics, MooncakeWorkerMetrics, MeteredTransferEngine
    exports io.mooncake4j.metrics;
}
