package io.mooncake4j.engine;

import java.util.List;

/**
 * Mooncake's Transfer Engine API in Java, with Mooncake's integer return conventions.
 *
 * <p>Register/unregister and initialisation return {@code 0} or a negative {@link ErrorCodes}
 * value; the synchronous batch transfers return {@code 0} when every descriptor was applied at
 * the target and a non-zero value otherwise (Mooncake's Python helpers return {@code -1});
 * the asynchronous batch API returns positive {@link StatusCodes} as Mooncake's C++ API does.
 *
 * <p>A segment is named {@code "<host>:<rpcPort>"}; {@link #getLocalSegmentName()} is this
 * engine's, and peers pass it as {@code targetSession}. Addresses are absolute virtual addresses
 * in the owning process: {@code src} in this process, {@code dst} in the target's.
 *
 * <p>Implementations are thread-safe: transfers may be issued from many threads at once.
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code mooncake-integration/transfer_engine/transfer_engine_py.cpp}
 */
public interface TransferEngine extends AutoCloseable {

    /** The metadata-server value for direct peer-to-peer handshakes (no etcd). */
    String P2P_HANDSHAKE = "P2PHANDSHAKE";

    /**
     * Starts the engine: binds the RPC (handshake) port and installs the transport.
     *
     * @param localHostname  host part of this engine's segment name (any port in it is ignored)
     * @param metadataServer {@link #P2P_HANDSHAKE}, or {@code http://host:port/metadata} (Mooncake's HTTP
     *                       metadata server: the engine publishes its segment there and reads peers' from it)
     * @param protocol       {@code "tcp"}, {@code "rdma"}, ...
     * @param deviceName     comma-separated RDMA device filter, {@code ""} for all
     * @return 0 on success, -1 on failure
     */
    int initialize(String localHostname, String metadataServer, String protocol, String deviceName);

    /** {@return the RPC (handshake) port; valid after a successful {@link #initialize}} */
    int getRpcPort();

    /** {@return {@code "<host>:<rpcPort>"}: the segment name peers use to reach this engine} */
    String getLocalSegmentName();

    /** {@return the protocol actually installed ({@code "tcp"}, {@code "rdma"}, ...), or null before initialisation} */
    String protocol();

    /**
     * Registers one buffer, so that peers may read and write it and local transfers may use it.
     *
     * @param address  base virtual address of the buffer in this process (not 0)
     * @param length   bytes (positive)
     * @param location where the memory lives: {@code "*"}, {@code "cpu:N"} or {@code "cuda:N"}
     * @return 0, or {@link ErrorCodes#INVALID_ARGUMENT} (zero length, null address, wrap-around),
     *         {@link ErrorCodes#ADDRESS_OVERLAPPED} (intersects a registered buffer), or another
     *         negative {@link ErrorCodes} value of the transport
     */
    int registerMemory(long address, long length, String location);

    /**
     * Registers one buffer with location {@code "*"}.
     *
     * @param address base virtual address of the buffer in this process
     * @param length  bytes
     * @return as {@link #registerMemory(long, long, String)}
     */
    default int registerMemory(long address, long length) {
        return registerMemory(address, length, "*");
    }

    /**
     * Whether and how this engine moves GPU memory at {@code location} ({@code cuda:N}) once it is
     * registered; asked before registration so that a caller can refuse early with the fix. The
     * default answers {@link DeviceMemoryAccess.Kind#UNKNOWN}.
     *
     * @param location a registration location, normally {@code "cuda:N"}
     * @return whether such memory can be registered, and how it would be moved or why not
     */
    default DeviceMemoryAccess deviceMemoryAccess(String location) {
        return DeviceMemoryAccess.unknown();
    }

    /**
     * Registers several buffers at once (all or nothing). The arrays must have equal length.
     * Location is {@code "*"} as in Mooncake's Python binding.
     *
     * @param addresses base addresses
     * @param lengths   byte lengths, one per address
     * @return 0 when all were registered; otherwise a negative {@link ErrorCodes} value and none
     *         was registered ({@link ErrorCodes#INVALID_ARGUMENT} for unequal arrays)
     */
    int batchRegisterMemory(long[] addresses, long[] lengths);

    /**
     * Unregisters the buffer whose base is {@code address}.
     *
     * @param address the exact base address the buffer was registered with
     * @return 0, or {@link ErrorCodes#ADDRESS_NOT_REGISTERED} when no buffer starts there
     */
    int unregisterMemory(long address);

    /**
     * Unregisters several buffers: every address that is a registered base is unregistered even
     * when another is not.
     *
     * @param addresses exact base addresses
     * @return 0, or {@link ErrorCodes#ADDRESS_NOT_REGISTERED} when any address was not a
     *         registered base ({@link ErrorCodes#INVALID_ARGUMENT} for a null array)
     */
    int batchUnregisterMemory(long[] addresses);

    /**
     * Writes {@code lengths[i]} bytes from local {@code src[i]} to {@code dst[i]} in the target
     * segment, for every i, and returns once all were applied (0) or any failed (non-zero).
     * No caller buffer is touched after this returns.
     *
     * @param targetSession the target's segment name ({@code "<host>:<rpcPort>"}), or this
     *                      engine's own for a local copy
     * @param src           local source addresses, inside registered buffers
     * @param dst           destination addresses in the target's registered buffers
     * @param lengths       byte counts, one per descriptor
     * @return 0 when every descriptor was applied at the target, non-zero otherwise
     */
    int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths);

    /**
     * Reads {@code lengths[i]} bytes from {@code remote[i]} in the target into local
     * {@code local[i]}, for every i, and returns once all were read (0) or any failed (non-zero).
     *
     * @param targetSession the target's segment name, or this engine's own for a local copy
     * @param local         local destination addresses, inside registered buffers
     * @param remote        source addresses in the target's registered buffers
     * @param lengths       byte counts, one per descriptor
     * @return 0 when every descriptor was read into local memory, non-zero otherwise
     */
    int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths);

    // ---------------------------------------------------------------- asynchronous batch API

    /**
     * Resolves a segment name to a handle for {@link TransferRequest#targetId()}: 0 for this
     * engine's own segment, a positive id for a peer, -1 on failure.
     *
     * @param segmentName {@code "<host>:<rpcPort>"} of the segment
     * @return the segment handle, or -1 when it cannot be opened
     */
    long openSegment(String segmentName);

    /**
     * Whether {@code segmentName}, resolved as a transfer to it would be (its descriptor fetched over
     * whatever name, port or metadata path), is this engine's own segment, so that a caller can refuse
     * to write "remote" data into its own memory. May block like {@link #openSegment}. Engines that
     * cannot tell answer false (the default).
     *
     * @param segmentName {@code "<host>:<rpcPort>"} of the segment
     * @return true when it is this engine's own segment
     */
    default boolean isOwnSegment(String segmentName) {
        return false;
    }

    /**
     * Whether the last connection towards {@code segmentName} found this engine's own segment after it
     * was opened as another one (its descriptor, fetched again, is ours; or its data address, resolved at
     * connect time, is our own data port on an address of this host), so that its transfers failed
     * without writing: a caller tells such a failure from another one. True until a refresh finds another
     * engine there. Never opens or fetches anything. Engines that cannot tell answer false (the default).
     *
     * @param segmentName {@code "<host>:<rpcPort>"} of the segment
     * @return true when its last connection or refresh was refused as this engine's own
     */
    default boolean refusedAsOwnSegment(String segmentName) {
        return false;
    }

    /**
     * The address of the first buffer a segment advertises (Mooncake Python
     * {@code get_first_buffer_address}: {@code buffers[0].addr} of the segment descriptor, in the
     * owner's registration order), or -1 when the segment cannot be opened, has no buffer, or this
     * engine cannot report it. Opens the segment if needed. {@code bin/mooncake4j bench} uses it to
     * find the target's buffer, as Mooncake's {@code transfer_engine_bench} does.
     *
     * @param segmentName {@code "<host>:<rpcPort>"} of the segment
     * @return the first advertised buffer's base address, or -1
     */
    default long getFirstBufferAddress(String segmentName) {
        return -1;
    }

    /**
     * Allocates a batch for the asynchronous API.
     *
     * @param capacity the most requests the batch may hold over its life
     * @return a positive batch id, or a negative {@link ErrorCodes} value (for instance once closed)
     */
    long allocateBatchId(int capacity);

    /**
     * Appends requests to a batch and starts them; their tasks are numbered after those already
     * submitted to the batch.
     *
     * @param batchId  an id from {@link #allocateBatchId}
     * @param requests the requests, each naming a segment handle from {@link #openSegment}
     * @return {@link StatusCodes#OK}, or a positive {@link StatusCodes} value (unknown batch, over
     *         capacity, bad request) and nothing started
     */
    int submitTransfer(long batchId, List<TransferRequest> requests);

    /**
     * Reports the state of one task of a batch.
     *
     * @param batchId   an id from {@link #allocateBatchId}
     * @param taskIndex the task's index, tasks being numbered from 0 in submission order
     * @return the task's state and bytes applied, or a status with a non-zero
     *         {@link TransferStatus#code()} and {@link TransferStatus.State#INVALID} for an unknown
     *         batch or index
     */
    TransferStatus getTransferStatus(long batchId, int taskIndex);

    /**
     * Frees a batch. {@link StatusCodes#BATCH_BUSY} unless every task was observed in a terminal
     * state through {@link #getTransferStatus}.
     *
     * @param batchId an id from {@link #allocateBatchId}
     * @return {@link StatusCodes#OK}, {@link StatusCodes#BATCH_BUSY}, or another positive
     *         {@link StatusCodes} value for an unknown batch
     */
    int freeBatchId(long batchId);

    /**
     * The engine's own counts of what it refused, dropped or rerouted (data-port rejections,
     * handshake connections over their bounds, peer and segment caps, fallbacks), for monitoring.
     * Cheap to call (a few volatile reads); readable at any time, also after {@link #close()}.
     * The default, for an engine that counts none of these, is {@link EngineCounters#NONE}.
     *
     * @return the counts since this engine was created
     */
    default EngineCounters counters() {
        return EngineCounters.NONE;
    }

    /**
     * Bytes handed to each installed transport so far, by transport name in the engine's order of
     * preference (a slice that fell back counts for both), for monitoring and the benchmarks; the
     * default, for an engine that does not choose among transports, is empty.
     *
     * @return transport name to bytes; empty before {@code initialize}
     */
    default java.util.Map<String, Long> bytesByTransport() {
        return java.util.Map.of();
    }

    /** Stops the engine and releases its sockets and threads. Idempotent. */
    @Override
    void close();
}
