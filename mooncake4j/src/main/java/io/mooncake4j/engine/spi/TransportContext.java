package io.mooncake4j.engine.spi;

import java.util.List;
import java.util.concurrent.ThreadFactory;
import java.util.function.Function;

/** What the core gives a transport at {@link Transport#install}. */
public interface TransportContext {

    /** The host part of the local segment name, as passed to {@code initialize}. */
    String hostname();

    /** The local segment name {@code host:rpcPort} (the handshake port is bound before transports install). */
    String segmentName();

    /** The comma-separated device filter passed to {@code initialize} ({@code ""}: all). */
    String deviceFilter();

    /**
     * This machine's identity (advertised as {@code mc4j_machine}): equal for two engines exactly
     * when they run on the same host and boot, so that a same-machine transport may map the peer's
     * memory.
     */
    String machineId();

    /** Buffers registered so far, in registration order (a transport installed late registers them). */
    List<LocalBuffer> registeredBuffers();

    /** Threads named {@code mooncake-<role>-<component>-<n>} for this transport's {@code component}. */
    ThreadFactory threads(String component);

    /**
     * Serves handshake requests of {@code type} (e.g. RDMA's Connection, type 0) with
     * {@code handler}: the parsed JSON request in, the JSON reply out (a thrown exception is
     * answered as an error). One handler per type; the core serves Metadata, Probe and Notify.
     */
    void serveHandshake(int type, Function<Object, String> handler);

    /**
     * Sends a handshake request of {@code type} with JSON {@code body} to segment {@code peer}'s
     * handshake port and returns the JSON reply, within the core's handshake timeouts.
     *
     * @throws io.mooncake4j.engine.handshake.HandshakeException on any failure
     */
    String handshake(String peer, int type, String body) throws io.mooncake4j.engine.handshake.HandshakeException;
}
