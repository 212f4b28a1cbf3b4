package io.mooncake4j.engine.spi;

/**
 * An engine that installs transports (the core): lets a transport's package find its installed
 * instance behind a {@link io.mooncake4j.engine.TransferEngine} for its monitoring getters
 * ({@code TcpTransport.in(engine)}, {@code RdmaTransport.in(engine)}) without importing the core.
 */
public interface TransportHost {

    /** The installed transport named {@code name}, or null (not initialised, or not installed). */
    Transport transport(String name);
}
