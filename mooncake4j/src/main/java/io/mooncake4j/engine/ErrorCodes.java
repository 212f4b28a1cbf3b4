package io.mooncake4j.engine;

/**
 * Mooncake's negative error codes ({@code TE/include/error.h}), returned by registration,
 * handshake and metadata operations. 0 is success.
 */
public final class ErrorCodes {
    /** Success. */
    public static final int OK = 0;
    /** An argument is invalid: a null or unequal array, a zero length, a null address, a closed engine. */
    public static final int INVALID_ARGUMENT = -1;
    /** More requests than a batch or queue can hold. */
    public static final int TOO_MANY_REQUESTS = -2;
    /** An address is not the base of (or not inside) a registered buffer. */
    public static final int ADDRESS_NOT_REGISTERED = -3;
    /** A batch still has tasks that were not observed in a terminal state. */
    public static final int BATCH_BUSY = -4;
    /** No usable device: no RDMA device for the transport, or a {@code cuda:N} location that does not exist. */
    public static final int DEVICE_NOT_FOUND = -6;
    /** A buffer intersects one already registered (or another of the same batch). */
    public static final int ADDRESS_OVERLAPPED = -7;
    /** A peer's host name could not be resolved. */
    public static final int DNS = -101;
    /** A socket operation towards a peer failed (connect, read, write, timeout). */
    public static final int SOCKET = -102;
    /** A peer's handshake reply is empty or not valid JSON. */
    public static final int MALFORMED_JSON = -103;
    /** A peer refused the handshake. */
    public static final int REJECT_HANDSHAKE = -104;
    /** A segment descriptor was received but is not valid. */
    public static final int METADATA = -200;
    /** An endpoint (connection to a peer) could not be set up. */
    public static final int ENDPOINT = -201;
    /** A device context failed (for RDMA: a memory region could not be registered). */
    public static final int CONTEXT = -202;
    /** NUMA placement failed. */
    public static final int NUMA = -300;
    /** A clock operation failed. */
    public static final int CLOCK = -301;
    /** Memory could not be allocated or pinned. */
    public static final int MEMORY = -302;
    /** The operation is not implemented by this engine. */
    public static final int NOT_IMPLEMENTED = -303;

    private ErrorCodes() {}

    /**
     * Mooncake's name for a code, for messages.
     *
     * @param code an error code
     * @return its name, such as {@code ERR_ADDRESS_OVERLAPPED}, or {@code ERR_<code>} for an
     *         unknown code
     */
    public static String name(int code) {
        return switch (code) {
            case OK -> "OK";
            case INVALID_ARGUMENT -> "ERR_INVALID_ARGUMENT";
            case TOO_MANY_REQUESTS -> "ERR_TOO_MANY_REQUESTS";
            case ADDRESS_NOT_REGISTERED -> "ERR_ADDRESS_NOT_REGISTERED";
            case BATCH_BUSY -> "ERR_BATCH_BUSY";
            case DEVICE_NOT_FOUND -> "ERR_DEVICE_NOT_FOUND";
            case ADDRESS_OVERLAPPED -> "ERR_ADDRESS_OVERLAPPED";
            case DNS -> "ERR_DNS";
            case SOCKET -> "ERR_SOCKET";
            case MALFORMED_JSON -> "ERR_MALFORMED_JSON";
            case REJECT_HANDSHAKE -> "ERR_REJECT_HANDSHAKE";
            case METADATA -> "ERR_METADATA";
            case ENDPOINT -> "ERR_ENDPOINT";
            case CONTEXT -> "ERR_CONTEXT";
            case NUMA -> "ERR_NUMA";
            case CLOCK -> "ERR_CLOCK";
            case MEMORY -> "ERR_MEMORY";
            case NOT_IMPLEMENTED -> "ERR_NOT_IMPLEMENTED";
            default -> "ERR_" + code;
        };
    }
}
