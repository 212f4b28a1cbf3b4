package io.mooncake4j.engine.spi;

import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Supplier;

/**
 * A transport an engine may install: its name, how to make a fresh one, and why it cannot run
 * here. The core's transport loader holds the built-in ones by name; tests offer their own
 * (emulated RDMA, a fault-injecting transport).
 *
 * @param name     its {@link Transport#name()}
 * @param create   makes a fresh, uninstalled transport (one per engine)
 * @param precheck {@code (protocol, deviceFilter) ->} why it cannot run here (null: try it); for a
 *                 required transport the reason fails {@code initialize}
 */
public record TransportFactory(String name, Supplier<Transport> create, BiFunction<String, String, String> precheck) {

    public TransportFactory {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(create, "create");
        precheck = precheck == null ? (p, d) -> null : precheck;
    }

    /** A factory without a precheck. */
    public TransportFactory(String name, Supplier<Transport> create) {
        this(name, create, null);
    }
}
