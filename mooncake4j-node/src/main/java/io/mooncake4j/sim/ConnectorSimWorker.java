package io.mooncake4j.sim;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;

import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.function.UnaryOperator;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The production {@link SimWorker}: one {@link MooncakeConnectorWorker} and the
 * {@link TransferEngine} it uses, for one tensor-parallel rank. The worker initialises the engine;
 * {@link #close()} closes the worker, then the engine (which drops its registrations), so that the
 * engine's owner can free the KV memory afterwards.
 *
 * <p>Confined to the engine's step-loop thread, except {@link #close()}.
 */
public final class ConnectorSimWorker implements SimWorker {

    private static final Logger LOG = LoggerFactory.getLogger(ConnectorSimWorker.class);

    private final MooncakeConnectorWorker worker;
    private final TransferEngine engine;
    private boolean closed;

    /** Wraps a worker whose KV caches are registered, and the engine it uses (both closed by {@link #close()}). */
    public ConnectorSimWorker(MooncakeConnectorWorker worker, TransferEngine engine) {
        this.worker = Objects.requireNonNull(worker, "worker");
        this.engine = Objects.requireNonNull(engine, "engine");
    }

    /**
     * A factory that gives each rank a new transfer engine of {@code engineKind}
     * ({@link TransferEngines#create}: {@code "tcp"}, or {@code "mock"} for the in-JVM engine), a
     * {@link MooncakeConnectorWorker} over it, and registers the rank's KV caches (a P worker also
     * starts its side-channel listener and registers with the bootstrap server).
     */
    public static SimEngine.WorkerFactory factory(String engineKind) {
        Objects.requireNonNull(engineKind, "engineKind");
        return factory(cfg -> TransferEngines.create(engineKind));
    }

    /**
     * A factory that gives each rank the transfer engine {@code engines} makes for its configuration
     * (for instance a scripted engine with injected faults), a {@link MooncakeConnectorWorker} over
     * it, and registers the rank's KV caches.
     */
    public static SimEngine.WorkerFactory factory(Function<MooncakeConnectorConfig, TransferEngine> engines) {
        return factory(engines, UnaryOperator.identity());
    }

    /**
     * As {@link #factory(Function)}, with {@code options} applied to each rank's worker builder
     * (for instance the bootstrap server's bind address). Each worker is told the model's MLA flag
     * and KV-head count when the engine passes the model
     * ({@link SimEngine.WorkerFactory#create(MooncakeConnectorConfig, KvCaches, ModelPreset)}).
     */
    public static SimEngine.WorkerFactory factory(Function<MooncakeConnectorConfig, TransferEngine> engines,
            UnaryOperator<MooncakeConnectorWorker.Builder> options) {
        Objects.requireNonNull(engines, "engines");
        Objects.requireNonNull(options, "options");
        return new SimEngine.WorkerFactory() {
            @Override
            public SimWorker create(MooncakeConnectorConfig cfg, KvCaches caches) {
                return build(engines, options, cfg, caches, null);
            }

            @Override
            public SimWorker create(MooncakeConnectorConfig cfg, KvCaches caches, ModelPreset model) {
                return build(engines, options, cfg, caches, Objects.requireNonNull(model, "model"));
            }
        };
    }

    private static SimWorker build(Function<MooncakeConnectorConfig, TransferEngine> engines,
            UnaryOperator<MooncakeConnectorWorker.Builder> options, MooncakeConnectorConfig cfg, KvCaches caches,
            ModelPreset model) {
        TransferEngine engine = Objects.requireNonNull(engines.apply(cfg), "engine");
        MooncakeConnectorWorker worker = null;
        try {
            MooncakeConnectorWorker.Builder b = MooncakeConnectorWorker.builder(cfg, engine, caches.config());
            if (model != null) {
                b.model(model.mla(), model.numKvHeads());
            }
            worker = options.apply(b).build();
            worker.registerKvCaches(caches.tensorsByLayer());
            return new ConnectorSimWorker(worker, engine);
        } catch (RuntimeException | Error e) {
            if (worker != null) {
                worker.close();
            }
            engine.close();
            throw e;
        }
    }

    @Override
    public void startLoadKv(MooncakeConnectorMetadata metadata) {
        worker.startLoadKv(metadata);
    }

    @Override
    public void saveKvLayer(String layerName) {
        worker.saveKvLayer(layerName);
    }

    @Override
    public void waitForSave() {
        worker.waitForSave();
    }

    @Override
    public boolean onFinished(Runnable wakeup) {
        worker.setFinishedListener(wakeup);
        return true;
    }

    @Override
    public TransferResults getTransferResults() {
        var r = worker.getTransferResults();
        return new TransferResults(r.finishedSending(), r.finishedRecving(), r.failedRecving());
    }

    @Override
    public Set<Integer> getBlockIdsWithLoadErrors() {
        return worker.getBlockIdsWithLoadErrors();
    }

    @Override
    public Optional<MooncakeKvConnectorStats> getKvConnectorStats() {
        return worker.getKvConnectorStats();
    }

    /** The wrapped worker. */
    public MooncakeConnectorWorker worker() {
        return worker;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            worker.close();
        } catch (RuntimeException e) {
            LOG.warn("closing the connector worker of {} rank {} failed", worker.config().engineId(),
                    worker.config().tpRank(), e);
        }
        engine.close();
    }
}
