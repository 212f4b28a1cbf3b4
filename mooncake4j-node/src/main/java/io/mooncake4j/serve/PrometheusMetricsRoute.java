package io.mooncake4j.serve;

import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.metrics.MeteredTransferEngine;
import io.mooncake4j.metrics.MooncakeConnectorMetrics;
import io.mooncake4j.metrics.MooncakeWorkerMetrics;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimWorker;

/** {@link MetricsRoute} over a {@link PrometheusMeterRegistry}; loaded only when Micrometer is present. */
final class PrometheusMetricsRoute implements MetricsRoute {

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);

    private PrometheusMetricsRoute() {
    }

    static MetricsRoute create() {
        return new PrometheusMetricsRoute();
    }

    private static Tags tags(MooncakeConnectorConfig config) {
        return Tags.of("engine", config.engineId(), "tp_rank", Integer.toString(config.tpRank()));
    }

    @Override
    public boolean available() {
        return true;
    }

    @Override
    public TransferEngine meter(TransferEngine engine, MooncakeConnectorConfig config) {
        return new MeteredTransferEngine(engine, registry, tags(config));
    }

    @Override
    public void bind(SimEngine engine) {
        MooncakeConnectorMetrics connector = new MooncakeConnectorMetrics(Tags.of("engine", engine.engineId()));
        connector.bindTo(registry);
        engine.onKvConnectorStats(connector::record);
        io.mooncake4j.sim.KvPool pool = engine.kvPool();
        if (pool != null) {
            // the store connector's counters: mooncake_store_connector_<name>{engine=...}
            for (String name : pool.counters().keySet()) {
                io.micrometer.core.instrument.Gauge.builder("mooncake_store_connector_" + name, pool,
                        p -> p.counters().getOrDefault(name, 0L)).tags(Tags.of("engine", engine.engineId()))
                        .register(registry);
            }
        }
        for (SimWorker w : engine.workers()) {
            if (w instanceof ConnectorSimWorker c) {
                new MooncakeWorkerMetrics(c.worker(), tags(c.worker().config())).bindTo(registry);
            }
        }
    }

    @Override
    public void bindCounts(String name, String description,
            java.util.Map<String, java.util.function.LongSupplier> byReason) {
        byReason.forEach((reason, value) -> io.micrometer.core.instrument.FunctionCounter
                .builder(name, value, v -> v.getAsLong()).tags("reason", reason).description(description)
                .register(registry));
    }

    @Override
    public String scrape() {
        return registry.scrape();
    }

    @Override
    public void close() {
        registry.close();
    }
}
