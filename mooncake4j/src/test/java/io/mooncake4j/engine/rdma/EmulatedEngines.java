package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.Map;
import java.util.OptionalLong;

/** Test helpers: RDMA engines over the emulated provider, RPC ports OS-assigned on 127.0.0.1. */
final class EmulatedEngines {

    /** A sysfs root that does not exist: no NUMA/PCI locality, no GID netdevs. */
    static final Path NO_SYSFS = Path.of("/nonexistent-mooncake4j-sysfs");

    private EmulatedEngines() {}

    static RdmaEngineConfig config(Map<String, String> env) {
        return RdmaEngineConfig.fromEnvironment(env, HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()))
                .withMemlockLimit(OptionalLong::empty)
                .withIpcLock(() -> false)
                .withNumaNodeOf(address -> -1)
                .withSysfsRoot(NO_SYSFS);
    }

    static RdmaEngineConfig config() {
        return config(Map.of());
    }

    /** rdma alone over {@code provider} (the emulated one, or verbs), always considered available (not started). */
    static CoreEngine alone(RdmaProvider provider, RdmaEngineConfig cfg) {
        return alone(provider, cfg, java.util.Optional::empty, GpuDirectSupport.cuda());
    }

    /** rdma alone over {@code provider}; {@code availability} says why RDMA cannot run here (empty: it can). */
    static CoreEngine alone(RdmaProvider provider, RdmaEngineConfig cfg,
            java.util.function.Supplier<java.util.Optional<RdmaAvailability.Cause>> availability) {
        return alone(provider, cfg, availability, GpuDirectSupport.cuda());
    }

    /**
     * rdma alone over {@code provider}, with the settings of {@code cfg}; {@code gpu} finds and exports
     * GPU memory for GPUDirect registration. Always tried ({@code "auto"} means rdma here), so a
     * required rdma diagnoses itself at install (not started).
     */
    static CoreEngine alone(RdmaProvider provider, RdmaEngineConfig cfg,
            java.util.function.Supplier<java.util.Optional<RdmaAvailability.Cause>> availability, GpuDirectSupport gpu) {
        io.mooncake4j.engine.spi.EngineSettings s = new io.mooncake4j.engine.spi.EngineSettings(cfg.handshake(),
                cfg.transferTimeoutMs(), io.mooncake4j.engine.spi.EngineSettings.DEFAULT_MAX_SEGMENTS,
                io.mooncake4j.engine.spi.EngineSettings.processEnvironment());
        return EngineBuilder.of(s, RdmaTransport.factory(provider, cfg, availability, gpu));
    }

    /** An initialised engine on the devices named by {@code deviceName} (comma-separated). */
    static CoreEngine started(EmulatedRdmaProvider fabric, String deviceName, RdmaEngineConfig cfg) {
        CoreEngine e = EmulatedEngines.alone(fabric, cfg);
        if (e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", deviceName) != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    static CoreEngine started(EmulatedRdmaProvider fabric, String deviceName) {
        return started(fabric, deviceName, config());
    }
}
