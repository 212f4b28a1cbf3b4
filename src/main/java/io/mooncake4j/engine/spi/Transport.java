package io.mooncake4j.engine.spi;

import java.util.List;

/**
 * One way of moving bytes between this engine's registered memory and a peer's (TENT's
 * {@code Transport}): {@code tcp}, {@code rdma}, {@code shm}, ... The engine core installs the
 * transports it is asked for, registers every buffer with each, and routes each request to the
 * first transport, in its order of preference, whose {@link #capabilities()} and
 * {@link #canTransfer} accept it; a slice failed with a retryable {@link SliceFailure} goes to the
 * next one. See the package comment for threads and the descriptor rules.
 *
 * <p>Lifecycle: {@code install} once, then any number of register/unregister/submit calls, then
 * {@code uninstall} once (idempotent); after uninstall every slice still held is failed and no
 * thread of the transport touches registered memory.
 */
public interface Transport {

    /** {@code "tcp"}, {@code "rdma"}, {@code "shm"}: the value {@code MC_TRANSPORTS} and logs use. */
    String name();

    TransportCapabilities capabilities();

    /**
     * Starts the transport (binds ports, opens devices, starts threads).
     *
     * @throws TransportException when it cannot run here; the message names the cause and the fix
     *                            (the core then runs without it, or fails {@code initialize} when
     *                            the caller asked for exactly this transport)
     */
    void install(TransportContext context) throws TransportException;

    /** Stops the transport and releases everything it holds. Idempotent. */
    void uninstall();

    /**
     * Registers buffers (all or none): memory regions, keys, mappings. The core has already
     * checked them against its registry.
     *
     * @return 0, or a negative {@link io.mooncake4j.engine.ErrorCodes} value (nothing kept)
     */
    int registerBuffers(List<LocalBuffer> buffers);

    /** Releases what {@link #registerBuffers} set up for these buffers; waits for in-flight slices over them. */
    void unregisterBuffers(List<LocalBuffer> buffers);

    /** Adds this transport's fields for the current registrations to the local descriptor. */
    void describe(DescriptorContribution out);

    /**
     * Whether this transport can move between {@code local} and the peer's {@code remote} buffer,
     * judging from the peer's descriptor only (cheap, no I/O): e.g. rdma wants keys on both sides,
     * shm wants the same machine and a shareable remote buffer.
     */
    boolean canTransfer(RemoteSegment peer, LocalBuffer local, io.mooncake4j.engine.handshake.SegmentDescriptor.Buffer remote);

    /** Starts moving {@code slices} to or from {@code peer}; ends each slice as {@link SliceGroup} says. */
    void submit(RemoteSegment peer, SliceGroup slices);

    /** Drops per-peer state for {@code peer} (its descriptor is being refreshed, or the engine forgets it). */
    default void forget(RemoteSegment peer) {}
}
