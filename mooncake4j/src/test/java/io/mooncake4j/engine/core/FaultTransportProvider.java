package io.mooncake4j.engine.core;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;

/**
 * The fault transport registered the way a new transport is: a provider declaring {@code "fault"}
 * (host memory, preference 50: after rdma, before tcp), named in a {@code META-INF/services} file.
 * {@link TransportLoaderTest} puts that file on a class loader of its own, so that the rest of the
 * suite's engines do not install it. Stateless.
 */
public final class FaultTransportProvider implements TransportProvider {

    static final String NAME = "fault";
    static final int PREFERENCE = 50;

    @Override
    public TransportDeclaration declaration() {
        return new FaultTransport(NAME, PREFERENCE).declaration();
    }

    @Override
    public TransportFactory factory(EngineSettings settings) {
        return new TransportFactory(declaration(), () -> new FaultTransport(NAME, PREFERENCE));
    }
}
