package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.net.InetAddress;
import java.util.Map;

/** Test helpers: TCP engines on 127.0.0.1 with OS-assigned ports. */
public final class TcpEngines {

    static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();

    private TcpEngines() {}

    public static TcpConfig config() {
        return TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(LOOPBACK));
    }

    static CoreEngine started(TcpConfig cfg) {
        return started(alone(cfg));
    }

    /** Initialises {@code e} on 127.0.0.1 (closing it when that fails). */
    static CoreEngine started(CoreEngine e) {
        if (e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0) {
            e.close();
            throw new AssertionError("initialize failed");
        }
        return e;
    }

    static CoreEngine started() {
        return started(config());
    }

    /** tcp alone with explicit settings, GPU memory through CUDA (not started). */
    public static CoreEngine alone(TcpConfig cfg) {
        return EngineBuilder.of(TcpTransport.engineSettings(cfg), TcpTransport.factory(cfg));
    }

    /** tcp alone with explicit settings, reaching GPU memory ({@code cuda:N}) through {@code deviceMemory} (not started). */
    public static CoreEngine alone(TcpConfig cfg, io.mooncake4j.memory.DeviceMemory deviceMemory) {
        return EngineBuilder.of(TcpTransport.engineSettings(cfg), TcpTransport.factory(cfg, deviceMemory));
    }

    /** tcp alone reaching GPU memory through {@code deviceMemory} with explicit staging settings (not started). */
    static CoreEngine staged(TcpConfig cfg, io.mooncake4j.memory.DeviceMemory deviceMemory, StagingConfig staging) {
        return EngineBuilder.of(TcpTransport.engineSettings(cfg), TcpTransport.factory(cfg, deviceMemory, staging));
    }
}
