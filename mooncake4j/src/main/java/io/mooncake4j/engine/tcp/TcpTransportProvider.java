package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;

/** Registers {@code tcp} with the engine core; its settings are {@link TcpConfig#fromSettings}. Stateless. */
public final class TcpTransportProvider implements TransportProvider {

    @Override
    public TransportDeclaration declaration() {
        return TcpTransport.DECLARATION;
    }

    @Override
    public TransportFactory factory(EngineSettings settings) {
        return TcpTransport.factory(TcpConfig.fromSettings(settings));
    }
}
