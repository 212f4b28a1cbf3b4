package io.mooncake4j.engine.core;

import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.ServiceLoader;

/**
 * The transports this library offers, found with {@link ServiceLoader} as {@link TransportProvider}s
 * (the module's {@code provides}, or {@code META-INF/services} on the class path) and kept in the
 * core's order of preference ({@link #ORDER}: each declaration's preference, ties by name). The
 * core names no transport: a provider's {@link TransportProvider#factory} parses its own settings
 * record from the engine's settings, once per factory. Stateless apart from the providers, loaded
 * once.
 */
public final class TransportLoader {

    /** The core's order: a declaration's preference, lower first, then its name. */
    static final Comparator<TransportDeclaration> ORDER =
            Comparator.comparingInt(TransportDeclaration::preference).thenComparing(TransportDeclaration::name);

    private TransportLoader() {}

    /** The providers of this library's class loader, loaded once. */
    private static final class Provided {
        static final List<TransportProvider> ALL = providers(TransportLoader.class.getClassLoader());
    }

    /**
     * The providers {@code loader} sees, in the core's order.
     *
     * @throws IllegalStateException when two providers declare one name
     */
    static List<TransportProvider> providers(ClassLoader loader) {
        List<TransportProvider> out = new ArrayList<>();
        Map<String, String> seen = new HashMap<>();
        for (TransportProvider p : ServiceLoader.load(TransportProvider.class, loader)) {
            String before = seen.putIfAbsent(p.declaration().name(), p.getClass().getName());
            if (before != null) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                        "transport '%s' is provided twice: by %s and by %s", p.declaration().name(), before,
                        p.getClass().getName()));
            }
            out.add(p);
        }
        out.sort(Comparator.comparing(TransportProvider::declaration, ORDER));
        return List.copyOf(out);
    }

    /**
     * The provided transports, in the core's order.
     *
     * @throws IllegalStateException when none is registered (a shaded jar that dropped the services file)
     */
    private static List<TransportProvider> provided() {
        if (Provided.ALL.isEmpty()) {
            throw new IllegalStateException("no transport is registered: the library's META-INF/services/"
                    + TransportProvider.class.getName() + " is missing from the class path (a shaded jar must "
                    + "merge services files)");
        }
        return Provided.ALL;
    }

    /** The provided transports' declarations, in the core's order (empty when none is registered). */
    public static List<TransportDeclaration> declarations() {
        return Provided.ALL.stream().map(TransportProvider::declaration).toList();
    }

    /** The provided transports' names, in the core's order. */
    public static List<String> names() {
        return declarations().stream().map(TransportDeclaration::name).toList();
    }

    /**
     * The factory of the provided transport {@code name}, configured from {@code settings}.
     *
     * @throws IllegalArgumentException for a name no provider declares (the message lists them)
     */
    public static TransportFactory load(String name, EngineSettings settings) {
        for (TransportProvider p : provided()) {
            if (p.declaration().name().equals(name)) {
                return p.factory(settings);
            }
        }
        throw new IllegalArgumentException(String.format(Locale.ROOT,
                "unknown transport '%s'; provided: %s", name, names()));
    }

    /** Every provided transport's factory, in the core's order. */
    public static List<TransportFactory> all(EngineSettings settings) {
        List<TransportFactory> out = new ArrayList<>();
        for (TransportProvider p : provided()) {
            out.add(p.factory(settings));
        }
        return out;
    }
}
