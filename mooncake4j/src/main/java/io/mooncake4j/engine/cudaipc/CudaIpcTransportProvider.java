package io.mooncake4j.engine.cudaipc;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;

/**
 * Registers {@code cuda-ipc} with the engine core; its settings are
 * {@link CudaIpcConfig#fromEnvironment} of the engine's environment snapshot. Stateless.
 */
public final class CudaIpcTransportProvider implements TransportProvider {

    @Override
    public TransportDeclaration declaration() {
        return CudaIpcTransport.DECLARATION;
    }

    @Override
    public TransportFactory factory(EngineSettings settings) {
        return CudaIpcTransport.factory(CudaIpcConfig.fromEnvironment(settings.environment()));
    }
}
