package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.internal.sys.Capabilities;
import io.mooncake4j.internal.sys.NumaMemory;
import io.mooncake4j.internal.sys.ResourceLimits;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongToIntFunction;
import java.util.function.Supplier;

/**
 * Settings of the {@link RdmaTransport}: the {@code MC_*} RDMA tunables, the handshake
 * (RPC port) settings, the synchronous-transfer deadline and where locality and limits come from.
 * Parsed once from the engine's environment snapshot ({@link #fromSettings}).
 *
 * @param settings          the {@code MC_*} RDMA tunables
 * @param handshake         the handshake (RPC port) settings
 * @param transferTimeoutMs {@code MC_TRANSFER_TIMEOUT} (s, minimum 5, default 30) in ms; the sync
 *                          helpers add 1 ns per byte, as Mooncake's Python binding does
 * @param memlockLimit      the {@code RLIMIT_MEMLOCK} soft limit (empty = unknown); tests inject one
 * @param sysfsRoot         sysfs mount for NUMA/PCI locality and GID netdevs
 * @param ipcLock           whether the process has {@code CAP_IPC_LOCK} (the kernel then does not
 *                          apply {@code RLIMIT_MEMLOCK} to pinning, so the pre-check only warns);
 *                          {@link Capabilities#hasIpcLock()} in production, tests inject one
 * @param topology          Mooncake's topology overrides ({@code MC_TE_FILTERS}, {@code MC_CUSTOM_TOPO_JSON})
 * @param numaNodeOf        the NUMA node of the page at an address, -1 unknown ({@link NumaMemory#nodeOf}
 *                          in production): host memory registered as {@code *} is published as
 *                          {@code cpu:N} of its first page, as Mooncake does
 * @param forceTcp          {@code MC_FORCE_TCP} set (any non-blank value): protocol {@code "auto"} never
 *                          picks rdma ({@link ProtocolSelection})
 */
public record RdmaEngineConfig(RdmaSettings settings, HandshakeConfig handshake, long transferTimeoutMs,
        Supplier<OptionalLong> memlockLimit, Path sysfsRoot, BooleanSupplier ipcLock, TopologyOverrides topology,
        LongToIntFunction numaNodeOf, boolean forceTcp) {

    /**
     * Mooncake's topology environment.
     *
     * @param deviceFilter   {@code MC_TE_FILTERS}: comma-separated device whitelist applied on top of
     *                       {@code device_name} (null/blank: none)
     * @param customTopology {@code MC_CUSTOM_TOPO_JSON}: a file holding the priority matrix
     *                       ({@code {"cpu:0": [["mlx5_0"], ["mlx5_1"]], ...}}) used instead of the
     *                       discovered one (null: discover); an unreadable file falls back to discovery
     */
    public record TopologyOverrides(String deviceFilter, Path customTopology) {
        public static final TopologyOverrides NONE = new TopologyOverrides(null, null);

        static TopologyOverrides from(Map<String, String> env) {
            String json = env.get("MC_CUSTOM_TOPO_JSON");
            return new TopologyOverrides(env.get("MC_TE_FILTERS"),
                    json == null || json.isBlank() ? null : Path.of(json.strip()));
        }
    }

    public RdmaEngineConfig {
        Objects.requireNonNull(settings, "settings");
        Objects.requireNonNull(handshake, "handshake");
        Objects.requireNonNull(memlockLimit, "memlockLimit");
        Objects.requireNonNull(sysfsRoot, "sysfsRoot");
        Objects.requireNonNull(ipcLock, "ipcLock");
        Objects.requireNonNull(topology, "topology");
        Objects.requireNonNull(numaNodeOf, "numaNodeOf");
        if (transferTimeoutMs <= 0) {
            throw new IllegalArgumentException("transferTimeoutMs must be positive");
        }
    }

    /** A configuration that reads {@code CAP_IPC_LOCK} and page locality from this process, with no topology overrides. */
    public RdmaEngineConfig(RdmaSettings settings, HandshakeConfig handshake, long transferTimeoutMs,
            Supplier<OptionalLong> memlockLimit, Path sysfsRoot) {
        this(settings, handshake, transferTimeoutMs, memlockLimit, sysfsRoot, Capabilities::hasIpcLock,
                TopologyOverrides.NONE, NumaMemory::nodeOf, false);
    }

    /** From the engine's settings: its handshake settings, transfer timeout and environment snapshot. */
    public static RdmaEngineConfig fromSettings(EngineSettings s) {
        return of(s.environment(), s.handshake(), s.transferTimeoutMs());
    }

    /** From {@code env} with an explicit handshake configuration (tests: OS-assigned ports). */
    public static RdmaEngineConfig fromEnvironment(Map<String, String> env, HandshakeConfig handshake) {
        return of(env, handshake, EngineSettings.transferTimeoutMs(env));
    }

    private static RdmaEngineConfig of(Map<String, String> env, HandshakeConfig handshake, long transferTimeoutMs) {
        return new RdmaEngineConfig(RdmaSettings.from(env), handshake, transferTimeoutMs,
                ResourceLimits::memlockSoftLimit, NicSelection.SYSFS, Capabilities::hasIpcLock,
                TopologyOverrides.from(env), NumaMemory::nodeOf, forceTcp(env));
    }

    private static boolean forceTcp(Map<String, String> env) {
        String force = env.get("MC_FORCE_TCP");
        return force != null && !force.isBlank();
    }

    /** A copy with other RDMA settings. */
    public RdmaEngineConfig withSettings(RdmaSettings s) {
        return new RdmaEngineConfig(s, handshake, transferTimeoutMs, memlockLimit, sysfsRoot, ipcLock, topology,
                numaNodeOf, forceTcp);
    }

    /** A copy with another memlock limit source. */
    public RdmaEngineConfig withMemlockLimit(Supplier<OptionalLong> limit) {
        return new RdmaEngineConfig(settings, handshake, transferTimeoutMs, limit, sysfsRoot, ipcLock, topology,
                numaNodeOf, forceTcp);
    }

    /** A copy with another {@code CAP_IPC_LOCK} source. */
    public RdmaEngineConfig withIpcLock(BooleanSupplier capability) {
        return new RdmaEngineConfig(settings, handshake, transferTimeoutMs, memlockLimit, sysfsRoot, capability,
                topology, numaNodeOf, forceTcp);
    }

    /** A copy with another sysfs root. */
    public RdmaEngineConfig withSysfsRoot(Path root) {
        return new RdmaEngineConfig(settings, handshake, transferTimeoutMs, memlockLimit, root, ipcLock, topology,
                numaNodeOf, forceTcp);
    }

    /** A copy with other topology overrides. */
    public RdmaEngineConfig withTopology(TopologyOverrides overrides) {
        return new RdmaEngineConfig(settings, handshake, transferTimeoutMs, memlockLimit, sysfsRoot, ipcLock,
                overrides, numaNodeOf, forceTcp);
    }

    /** A copy with another page-locality source. */
    public RdmaEngineConfig withNumaNodeOf(LongToIntFunction nodeOf) {
        return new RdmaEngineConfig(settings, handshake, transferTimeoutMs, memlockLimit, sysfsRoot, ipcLock,
                topology, nodeOf, forceTcp);
    }

    /** A copy with another synchronous-transfer deadline. */
    public RdmaEngineConfig withTransferTimeoutMs(long ms) {
        return new RdmaEngineConfig(settings, handshake, ms, memlockLimit, sysfsRoot, ipcLock, topology, numaNodeOf, forceTcp);
    }
}
