package io.mooncake4j.engine.handshake;

import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Binds a listener the way Mooncake's {@code findAvailableTcpPort}
 * ({@code TE/src/transfer_metadata_plugin.cpp}) picks ports in P2P mode: up to {@value #TRIES}
 * tries at a random port in {@code [minPort, maxPort]} on the configured (default wildcard)
 * address. With {@code maxPort == 0} the OS assigns the port (tests).
 */
public final class PortBinder {

    /** Mooncake's number of tries. */
    public static final int TRIES = 500;

    /**
     * Binds something to an address; throws when the port is taken.
     *
     * @param <T> what is bound (a server socket, a channel)
     */
    @FunctionalInterface
    public interface Binder<T> {
        T bind(InetSocketAddress address) throws IOException;
    }

    private PortBinder() {}

    /** Binds with {@code binder}; throws {@link IOException} when no port of the range is free. */
    public static <T> T bind(HandshakeConfig cfg, Binder<T> binder) throws IOException {
        if (cfg.maxPort() == 0) {
            return binder.bind(address(cfg, 0));
        }
        IOException last = null;
        int span = cfg.maxPort() - cfg.minPort() + 1;
        for (int i = 0; i < TRIES; i++) {
            int port = cfg.minPort() + ThreadLocalRandom.current().nextInt(span);
            try {
                return binder.bind(address(cfg, port));
            } catch (BindException e) {
                last = e;
            }
        }
        throw new IOException(String.format(Locale.ROOT,
                "no free TCP port in [%d, %d] after %d tries (set MC_MIN_RPC_PORT/MC_MAX_RPC_PORT)",
                cfg.minPort(), cfg.maxPort(), TRIES), last);
    }

    private static InetSocketAddress address(HandshakeConfig cfg, int port) {
        return cfg.bindAddress() == null ? new InetSocketAddress(port) : new InetSocketAddress(cfg.bindAddress(), port);
    }
}
