package io.mooncake4j.engine.core;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Makes engine cores: {@link EngineSettings} (read once from the environment unless given) plus
 * the transports offered, by name from the {@link TransportLoader}'s providers or as factories of
 * their own (tests: an emulated RDMA provider, a fault-injecting transport). Which offered
 * transports {@code initialize} then installs follows its {@code protocol}, the transports'
 * declarations and {@code MC_TRANSPORTS}. It names no transport.
 *
 * <p>The static methods are the engines the library, its tools and tests use: every provided
 * transport ({@link #allTransports()}: {@code TransferEngines.create("auto" | "rdma" | "shm")}), one
 * provided transport alone ({@link #only}: {@code "tcp"}, the benchmark's {@code shm-direct}), and
 * explicit factories ({@link #of}). Not thread-safe (a builder is used by one thread); the engines it
 * builds are.
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

    /** Offers the provided transport {@code name} ({@link TransportLoader#load}), configured from the settings. */
    public EngineBuilder offer(String name) {
        offered.add(TransportLoader.load(name, effectiveSettings()));
        return this;
    }

    /** Offers every provided transport. */
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

    /** Every provided transport (cuda-ipc, shm, rdma over libibverbs, tcp), configured from the environment. */
    public static CoreEngine allTransports() {
        return new EngineBuilder().offerAll().build();
    }

    /**
     * The provided transport {@code name} alone, configured from the environment: {@code "tcp"}
     * (wire-compatible with Mooncake's TCP transport), {@code "rdma"} (Mooncake's RDMA engine; where
     * RDMA cannot run, {@code initialize} returns -1 and {@code lastError} holds the diagnosis),
     * {@code "shm"} (every slice over shm, none falls back: {@code bench --engine=shm-direct}).
     * Alone, it is always tried, whatever {@code protocol} says: its install diagnoses itself.
     *
     * @throws IllegalArgumentException for a name no provider declares
     */
    public static CoreEngine only(String name) {
        EngineSettings s = EngineSettings.fromEnvironment();
        return of(s, TransportLoader.load(name, s).alwaysTried());
    }

    /** An engine with these settings offering these transports. */
    public static CoreEngine of(EngineSettings settings, TransportFactory... transports) {
        return new EngineBuilder().settings(settings).offer(transports).build();
    }
}
