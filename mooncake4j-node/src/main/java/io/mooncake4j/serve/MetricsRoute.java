package io.mooncake4j.serve;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.sim.SimEngine;

/**
 * The node's {@code GET /metrics}: Prometheus text from a Micrometer registry when
 * {@code micrometer-registry-prometheus} is on the path, else nothing (the route answers 404 and no
 * Micrometer class is loaded). The Micrometer side is {@link PrometheusMetricsRoute}, reached only
 * after {@link #create} found the registry class. Thread-safe.
 */
interface MetricsRoute extends AutoCloseable {

    /** The registry class whose presence turns the route on. */
    String REGISTRY_CLASS = "io.micrometer.prometheusmetrics.PrometheusMeterRegistry";

    /** No Micrometer: engines unwrapped, nothing bound, no route. */
    MetricsRoute NONE = new MetricsRoute() {
        @Override
        public boolean available() {
            return false;
        }

        @Override
        public TransferEngine meter(TransferEngine engine, MooncakeConnectorConfig config) {
            return engine;
        }

        @Override
        public void bind(SimEngine engine) {
        }

        @Override
        public void bindCounts(String name, String description,
                java.util.Map<String, java.util.function.LongSupplier> byReason) {
        }

        @Override
        public String scrape() {
            throw new IllegalStateException("no Prometheus registry");
        }

        @Override
        public void close() {
        }
    };

    /** A Prometheus-backed route when the registry class can be loaded, else {@link #NONE}. */
    static MetricsRoute create() {
        try {
            Class.forName(REGISTRY_CLASS, false, MetricsRoute.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return NONE;
        }
        return PrometheusMetricsRoute.create();
    }

    /** Whether {@code /metrics} is served. */
    boolean available();

    /** {@code engine}, counting its transfers when metrics are on (tags: engine id, TP rank). */
    TransferEngine meter(TransferEngine engine, MooncakeConnectorConfig config);

    /** Binds the connector statistics of {@code engine}'s steps and each worker's counters. */
    void bind(SimEngine engine);

    /**
     * Counters {@code name} with a {@code reason} tag, one per entry of {@code byReason}, read at scrape
     * (the node's front-door cut-offs and evictions).
     */
    void bindCounts(String name, String description, java.util.Map<String, java.util.function.LongSupplier> byReason);

    /** The Prometheus text exposition (format 0.0.4) of every meter. */
    String scrape();

    /** The content type of {@link #scrape()}. */
    default String contentType() {
        return "text/plain; version=0.0.4; charset=utf-8";
    }

    @Override
    void close();
}
