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
     * @param metadataServer must be {@link #P2P_HANDSHAKE}
     * @param protocol       {@code "tcp"}, {@code "rdma"}, ...
     * @param deviceName     comma-separated RDMA device filter, {@code ""} for all
     * @return 0 on success, -1 on failure
     */
    int initialize(String localHostname, String metadataServer, String protocol, String deviceName);

    /** The RPC (handshake) port; valid after a successful {@link #initialize}. */
    int getRpcPort();

    /** {@code "<host>:<rpcPort>"}: the name peers use to reach this engine. */
    String getLocalSegmentName();

    /** The protocol actually installed ({@code "tcp"}, {@code "rdma"}, ...), or null before initialisation. */
    String protocol();

    /** Registers one buffer. 0, or {@link ErrorCodes#INVALID_ARGUMENT}, {@link ErrorCodes#ADDRESS_OVERLAPPED}, ... */
    int registerMemory(long address, long length, String location);

    /** Registers one buffer with location {@code "*"}. */
    default int registerMemory(long address, long length) {
        return registerMemory(address, length, "*");
    }

    /**
     * Whether and how this engine moves GPU memory at {@code location} ({@code cuda:N}) once it is
     * registered; asked before registration so that a caller can refuse early with the fix. The
     * default answers {@link DeviceMemoryAccess.Kind#UNKNOWN}.
     */
    default DeviceMemoryAccess deviceMemoryAccess(String location) {
        return DeviceMemoryAccess.unknown();
    }

    /**
     * Registers several buffers at once (all or nothing). The arrays must have equal length.
     * Location is {@code "*"} as in Mooncake's Python binding.
     */
    int batchRegisterMemory(long[] addresses, long[] lengths);

    /** Unregisters the buffer whose base is {@code address}; {@link ErrorCodes#ADDRESS_NOT_REGISTERED} otherwise. */
    int unregisterMemory(long address);

    /** Unregisters several buffers. */
    int batchUnregisterMemory(long[] addresses);

    /**
     * Writes {@code lengths[i]} bytes from local {@code src[i]} to {@code dst[i]} in the target
     * segment, for every i, and returns once all were applied (0) or any failed (non-zero).
     * No caller buffer is touched after this returns.
     */
    int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths);

    /** Reads {@code lengths[i]} bytes from {@code remote[i]} in the target into local {@code local[i]}. */
    int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths);

    // ---------------------------------------------------------------- asynchronous batch API

    /**
     * Resolves a segment name to a handle for {@link TransferRequest#targetId()}: 0 for this
     * engine's own segment, a positive id for a peer, -1 on failure.
     */
    long openSegment(String segmentName);

    /**
     * The address of the first buffer a segment advertises (Mooncake Python
     * {@code get_first_buffer_address}: {@code buffers[0].addr} of the segment descriptor, in the
     * owner's registration order), or -1 when the segment cannot be opened, has no buffer, or this
     * engine cannot report it. Opens the segment if needed. {@code bin/mooncake4j bench} uses it to
     * find the target's buffer, as Mooncake's {@code transfer_engine_bench} does.
     */
    default long getFirstBufferAddress(String segmentName) {
        return -1;
    }

    /** Allocates a batch that can hold {@code capacity} requests; returns a positive id, or a negative error. */
    long allocateBatchId(int capacity);

    /** Appends requests to a batch and starts them. Returns a {@link StatusCodes} value (0 = ok). */
    int submitTransfer(long batchId, List<TransferRequest> requests);

    /** The state of task {@code taskIndex} of a batch (tasks are numbered in submission order). */
    TransferStatus getTransferStatus(long batchId, int taskIndex);

    /**
     * Frees a batch. {@link StatusCodes#BATCH_BUSY} unless every task was observed in a terminal
     * state through {@link #getTransferStatus}.
     */
    int freeBatchId(long batchId);

    /** Stops the engine and releases its sockets and threads. Idempotent. */
    @Override
    void close();
}
