package io.mooncake4j.engine.spi;

/**
 * A transport the engine core can install, found with {@link java.util.ServiceLoader} (the
 * module's {@code provides ... TransportProvider}, and {@code META-INF/services} for the class
 * path). The core orders and chooses transports by their {@link #declaration()} only; it never
 * names one. Adding a transport is its package (the {@link Transport}, its settings record and
 * this provider) plus one registration line in each of those two places.
 *
 * <p>Implementations are stateless and have a public no-argument constructor.
 */
public interface TransportProvider {

    /** {@return the transport's name, reachable memory and place in the order} */
    TransportDeclaration declaration();

    /**
     * The factory of this transport configured from {@code settings}: the one place where the
     * transport's typed settings record is parsed from the engine's environment snapshot
     * ({@link EngineSettings#environment()}); the transport itself reads no variable.
     */
    TransportFactory factory(EngineSettings settings);
}
