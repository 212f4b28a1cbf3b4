package io.mooncake4j.engine.core;

import io.mooncake4j.engine.cudaipc.CudaIpcConfig;
import io.mooncake4j.engine.cudaipc.CudaIpcTransport;
import io.mooncake4j.engine.rdma.RdmaEngineConfig;
import io.mooncake4j.engine.rdma.RdmaTransport;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one place that knows the built-in transports: their factories by name, configured from the
 * engine's settings ({@code cuda-ipc}, {@code shm}, {@code rdma} over libibverbs, {@code tcp}). Each
 * transport's settings record ({@link CudaIpcConfig}, {@link RdmaEngineConfig}, {@link TcpConfig} with
 * its staging) is parsed here, once per factory, from the settings' one environment snapshot; the
 * transports get those typed records and never read a variable themselves.
 * Nothing else in the library names a transport class to make one; the transports themselves
 * import only the SPI, so this is the only arrow from the core down to them. Stateless.
 */
public final class TransportLoader {

    private TransportLoader() {}

    /** The built-in transports' names, in the core's order of preference. */
    public static List<String> names() {
        return TransportPlan.ORDER;
    }

    /**
     * The factory of the built-in transport {@code name}, configured from {@code settings}.
     *
     * @throws IllegalArgumentException for a name that is not built in (the message lists them)
     */
    public static TransportFactory load(String name, EngineSettings settings) {
        return switch (name) {
            case CudaIpcTransport.NAME -> CudaIpcTransport.factory(CudaIpcConfig.fromEnvironment(settings.environment()));
            case ShmTransport.NAME -> ShmTransport.factory();
            case RdmaTransport.NAME -> RdmaTransport.factory(RdmaEngineConfig.fromSettings(settings));
            case TcpTransport.NAME -> TcpTransport.factory(TcpConfig.fromSettings(settings));
            default -> throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "unknown transport '%s'; built in: %s", name, names()));
        };
    }

    /** Every built-in transport's factory, in the core's order of preference. */
    public static List<TransportFactory> all(EngineSettings settings) {
        List<TransportFactory> out = new ArrayList<>();
        for (String n : names()) {
            out.add(load(n, settings));
        }
        return out;
    }
}
