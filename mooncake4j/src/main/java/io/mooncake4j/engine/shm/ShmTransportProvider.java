package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;

/** Registers {@code shm} with the engine core (it has no settings of its own). Stateless. */
public final class ShmTransportProvider implements TransportProvider {

    @Override
    public TransportDeclaration declaration() {
        return ShmTransport.DECLARATION;
    }

    @Override
    public TransportFactory factory(EngineSettings settings) {
        return ShmTransport.factory();
    }
}
