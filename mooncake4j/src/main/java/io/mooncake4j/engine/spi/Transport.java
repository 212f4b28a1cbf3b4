package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.EngineCounters;

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

    /**
     * Whether the peer's descriptor advertises what this transport needs at all (tcp: a data port;
     * rdma: devices), regardless of buffers. A peer no installed transport reaches gets
     * {@link io.mooncake4j.engine.StatusCodes#NOT_SUPPORTED_TRANSPORT} at submission.
     */
    default boolean reaches(RemoteSegment peer) {
        return true;
    }

    /** Starts moving {@code slices} to or from {@code peer}; ends each slice as {@link SliceGroup} says. */
    void submit(RemoteSegment peer, SliceGroup slices);

    /** Drops per-peer state for {@code peer} (its descriptor is being refreshed, or the engine forgets it). */
    default void forget(RemoteSegment peer) {}

    /**
     * What this transport itself refused or dropped so far (its servers' rejections, its peer
     * cap); the engine core adds its own counts and sums over its transports. Any thread.
     *
     * @return the transport's counts; {@link EngineCounters#NONE} by default
     */
    default EngineCounters counters() {
        return EngineCounters.NONE;
    }

    /**
     * Returns once none of this transport's threads touches the memory of {@code batch}, which
     * was given up (its waiting tasks are already failed), or once the deadline passed (then it
     * cuts the connections still touching it).
     */
    default void evict(BatchTasks batch, long deadlineNanos) {}

    /**
     * The location of a buffer registered as {@code "*"} when this transport recognises it as
     * device memory ({@code cuda:N}), else null (host memory as far as it knows).
     */
    default String detectLocation(long address) {
        return null;
    }

    /** Whether and how this transport moves GPU memory at {@code location}; UNKNOWN when it does not say. */
    default DeviceMemoryAccess deviceMemoryAccess(String location) {
        return DeviceMemoryAccess.unknown();
    }

    /**
     * A transfer inside this process where one side is device memory (the core copies host to
     * host itself): {@link #COPIED}, {@link #COPY_FAILED} (logged), or {@link #COPY_UNSUPPORTED}.
     */
    default int copyLocal(long src, LocalBuffer srcBuffer, long dst, LocalBuffer dstBuffer, long length) {
        return COPY_UNSUPPORTED;
    }

    /**
     * The last control-path error of this transport (registration, device events) in words that
     * name the cause and the fix, or null; the core's {@code lastError} prefers it to its own.
     */
    default String lastError() {
        return null;
    }

    /** {@link #copyLocal}: done. */
    int COPIED = 1;
    /** {@link #copyLocal}: this transport does not copy such memory. */
    int COPY_UNSUPPORTED = 0;
    /** {@link #copyLocal}: it tried and failed. */
    int COPY_FAILED = -1;
}
