package io.mooncake4j.engine.spi;

import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Supplier;

/**
 * A transport an engine may install: its declaration, how to make a fresh one, and why it cannot
 * run here. {@link TransportProvider}s make them from the engine's settings; tests offer their own
 * (emulated RDMA, a fault-injecting transport).
 *
 * @param declaration its name, reachable memory and place in the core's order
 * @param create      makes a fresh, uninstalled transport (one per engine)
 * @param precheck    {@code (protocol, deviceFilter) ->} why it cannot run here (null: try it); for a
 *                    required transport the reason fails {@code initialize}
 */
public record TransportFactory(TransportDeclaration declaration, Supplier<Transport> create,
        BiFunction<String, String, String> precheck) {

    public TransportFactory {
        Objects.requireNonNull(declaration, "declaration");
        Objects.requireNonNull(create, "create");
        precheck = precheck == null ? (p, d) -> null : precheck;
    }

    /** A factory without a precheck. */
    public TransportFactory(TransportDeclaration declaration, Supplier<Transport> create) {
        this(declaration, create, null);
    }

    /** {@return the declared name, which the transports it makes report as {@link Transport#name()}} */
    public String name() {
        return declaration.name();
    }

    /** The same factory without its precheck: the transport is always tried, and its install diagnoses itself. */
    public TransportFactory alwaysTried() {
        return new TransportFactory(declaration, create);
    }
}
