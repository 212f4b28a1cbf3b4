package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;

/**
 * Registers {@code rdma} over libibverbs with the engine core; its settings are
 * {@link RdmaEngineConfig#fromSettings}. Stateless.
 */
public final class RdmaTransportProvider implements TransportProvider {

    @Override
    public TransportDeclaration declaration() {
        return RdmaTransport.DECLARATION;
    }

    @Override
    public TransportFactory factory(EngineSettings settings) {
        return RdmaTransport.factory(RdmaEngineConfig.fromSettings(settings));
    }
}
