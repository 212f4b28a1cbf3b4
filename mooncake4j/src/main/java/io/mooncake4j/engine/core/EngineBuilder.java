package io.mooncake4j.engine.core;

import io.mooncake4j.engine.rdma.GpuDirectSupport;
import io.mooncake4j.engine.rdma.RdmaAvailability;
import io.mooncake4j.engine.rdma.RdmaEngineConfig;
import io.mooncake4j.engine.rdma.RdmaProvider;
import io.mooncake4j.engine.rdma.RdmaTransport;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.DeviceMemory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Makes engine cores: {@link EngineSettings} (read once from the environment unless given) plus
 * the transports offered, by name from the {@link TransportLoader} or as factories of their own
 * (tests: an emulated RDMA provider, a fault-injecting transport). Which offered transports
 * {@code initialize} then installs follows its {@code protocol} and {@code MC_TRANSPORTS}.
 *
 * <p>The static methods are the engines the library, its tools and tests use: every built-in
 * transport ({@link #allTransports()}: {@code TransferEngines.create("auto" | "rdma" | "shm")}), tcp
 * alone ({@code "tcp"}), rdma alone, shm alone (the benchmark's {@code shm-direct}). Not thread-safe
 * (a builder is used by one thread); the engines it builds are.
 */
public final class EngineBuilder {

    private EngineSettings settings;
    private Map<String, String> environment;
    private final List<TransportFactory> offered = new ArrayList<>();

    /** A builder offering nothing yet. */
    public EngineBuilder() {}

    /** The settings to use (default: {@link EngineSettings#fromEnvironment()} at {@link #build()}). */
    public EngineBuilder settings(EngineSettings s) {
        this.settings = Objects.requireNonNull(s, "settings");
        return this;
    }

    /** Replaces the settings' environment ({@code MC_TRANSPORTS}, the transports' variables); tests pass their own. */
    public EngineBuilder environment(Map<String, String> env) {
        this.environment = Map.copyOf(env);
        return this;
    }

    /** Offers these transports (any order: installation follows the core's order of preference). */
    public EngineBuilder offer(TransportFactory... factories) {
        for (TransportFactory f : factories) {
            offered.add(Objects.requireNonNull(f, "factory"));
        }
        return this;
    }

    /** Offers the built-in transport {@code name} ({@link TransportLoader#load}), configured from the settings. */
    public EngineBuilder offer(String name) {
        offered.add(TransportLoader.load(name, effectiveSettings()));
        return this;
    }

    /** Offers every built-in transport. */
    public EngineBuilder offerAll() {
        offered.addAll(TransportLoader.all(effectiveSettings()));
        return this;
    }

    /** A new, uninitialised engine; the caller owns it and must close it. */
    public CoreEngine build() {
        if (offered.isEmpty()) {
            throw new IllegalStateException("an engine needs at least one transport; offer one");
        }
        return new CoreEngine(effectiveSettings(), offered);
    }

    private EngineSettings effectiveSettings() {
        if (settings == null) {
            settings = environment == null ? EngineSettings.fromEnvironment() : EngineSettings.fromEnvironment(environment);
        }
        return environment == null ? settings : settings.withEnvironment(environment);
    }

    // ------------------------------------------------------------------ the engines in use

    /** Every built-in transport (cuda-ipc, shm, rdma over libibverbs, tcp), configured from the environment. */
    public static CoreEngine allTransports() {
        return new EngineBuilder().offerAll().build();
    }

    /** tcp alone, configured from the environment: wire-compatible with Mooncake's TCP transport. */
    public static CoreEngine tcp() {
        return tcp(TcpConfig.fromSettings(EngineSettings.fromEnvironment()));
    }

    /** tcp alone with explicit settings; GPU memory through CUDA. */
    public static CoreEngine tcp(TcpConfig config) {
        return of(TcpTransport.engineSettings(config), TcpTransport.factory(config));
    }

    /** tcp alone with explicit settings, reaching GPU memory ({@code cuda:N}) through {@code deviceMemory}. */
    public static CoreEngine tcp(TcpConfig config, DeviceMemory deviceMemory) {
        return of(TcpTransport.engineSettings(config), TcpTransport.factory(config, deviceMemory));
    }

    /**
     * rdma alone over libibverbs, configured from the environment: wire-compatible with Mooncake's
     * RDMA engine. Without RDMA {@code initialize} returns -1 and {@code lastError} holds the diagnosis.
     */
    public static CoreEngine rdma() {
        EngineSettings s = EngineSettings.fromEnvironment();
        return rdma(s, RdmaTransport.factory(RdmaEngineConfig.fromSettings(s)));
    }

    /** rdma alone over {@code provider} (tests: the emulated provider), always considered available. */
    public static CoreEngine rdma(RdmaProvider provider, RdmaEngineConfig config) {
        return rdma(provider, config, Optional::empty, GpuDirectSupport.cuda());
    }

    /** rdma alone over {@code provider}; {@code availability} says why RDMA cannot run here (empty: it can). */
    public static CoreEngine rdma(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability) {
        return rdma(provider, config, availability, GpuDirectSupport.cuda());
    }

    /**
     * rdma alone over {@code provider}; {@code gpu} finds and exports GPU memory ({@code cuda:N}) for
     * GPUDirect registration.
     */
    public static CoreEngine rdma(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability, GpuDirectSupport gpu) {
        EngineSettings s = new EngineSettings(config.handshake(), config.transferTimeoutMs(),
                EngineSettings.DEFAULT_MAX_SEGMENTS, EngineSettings.processEnvironment());
        return rdma(s, RdmaTransport.factory(provider, config, availability, gpu));
    }

    private static CoreEngine rdma(EngineSettings s, TransportFactory rdma) {
        // "auto" and "" mean rdma here: the factory has no precheck, so rdma is tried and diagnosed
        return of(s, new TransportFactory(rdma.name(), rdma.create()));
    }

    /**
     * shm alone, configured from the environment: every slice goes over shm, none falls back (a
     * peer on another machine, or a buffer shm cannot reach, fails its transfer); to measure the
     * shm path alone ({@code bench --engine=shm-direct}, the two-process tests).
     */
    public static CoreEngine shmDirect() {
        return of(EngineSettings.fromEnvironment(), ShmTransport.factory());
    }

    /** An engine with these settings offering these transports. */
    public static CoreEngine of(EngineSettings settings, TransportFactory... transports) {
        return new EngineBuilder().settings(settings).offer(transports).build();
    }
}
