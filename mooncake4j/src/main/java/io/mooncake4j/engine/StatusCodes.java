package io.mooncake4j.engine;

/**
 * Mooncake's positive {@code Status::Code} values ({@code TE/include/common/base/status.h}),
 * returned by the asynchronous batch API. 0 is success.
 */
public final class StatusCodes {
    /** Success. */
    public static final int OK = 0;
    /**
     * An argument is invalid: unknown batch, segment handle or task index, bad opcode, negative
     * length, closed engine.
     */
    public static final int INVALID_ARGUMENT = 1;
    /** A submission would take a batch past its capacity. */
    public static final int TOO_MANY_REQUESTS = 2;
    /** An address lies outside the registered buffers. */
    public static final int ADDRESS_NOT_REGISTERED = 3;
    /** A batch still has tasks that were not observed in a terminal state. */
    public static final int BATCH_BUSY = 4;
    /** No usable device. */
    public static final int DEVICE_NOT_FOUND = 6;
    /** A buffer intersects one already registered. */
    public static final int ADDRESS_OVERLAPPED = 7;
    /** No installed transport reaches the target segment. */
    public static final int NOT_SUPPORTED_TRANSPORT = 8;
    /** A peer's host name could not be resolved. */
    public static final int DNS = 101;
    /** A socket operation towards a peer failed. */
    public static final int SOCKET = 102;
    /** A peer's handshake reply is not valid JSON. */
    public static final int MALFORMED_JSON = 103;
    /** A peer refused the handshake. */
    public static final int REJECT_HANDSHAKE = 104;
    /** Segment metadata could not be obtained or is not valid. */
    public static final int METADATA = 200;
    /** An endpoint (connection to a peer) could not be set up. */
    public static final int ENDPOINT = 201;
    /** A device context failed. */
    public static final int CONTEXT = 202;
    /** NUMA placement failed. */
    public static final int NUMA = 300;
    /** A clock operation failed. */
    public static final int CLOCK = 301;
    /** Memory could not be allocated or pinned. */
    public static final int MEMORY = 302;
    /** The operation is not implemented by this engine. */
    public static final int NOT_IMPLEMENTED = 999;

    private StatusCodes() {}
}
