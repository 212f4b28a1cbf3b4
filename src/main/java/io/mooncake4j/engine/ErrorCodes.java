package io.mooncake4j.engine;

/**
 * Mooncake's negative error codes ({@code TE/include/error.h}), returned by registration,
 * handshake and metadata operations. 0 is success.
 */
public final class ErrorCodes {
    public static final int OK = 0;
    public static final int INVALID_ARGUMENT = -1;
    public static final int TOO_MANY_REQUESTS = -2;
    public static final int ADDRESS_NOT_REGISTERED = -3;
    public static final int BATCH_BUSY = -4;
    public static final int DEVICE_NOT_FOUND = -6;
    public static final int ADDRESS_OVERLAPPED = -7;
    public static final int DNS = -101;
    public static final int SOCKET = -102;
    public static final int MALFORMED_JSON = -103;
    public static final int REJECT_HANDSHAKE = -104;
    public static final int METADATA = -200;
    public static final int ENDPOINT = -201;
    public static final int CONTEXT = -202;
    public static final int NUMA = -300;
    public static final int CLOCK = -301;
    public static final int MEMORY = -302;
    public static final int NOT_IMPLEMENTED = -303;

    private ErrorCodes() {}

    /** Mooncake's name for a code, for messages: {@code ERR_ADDRESS_OVERLAPPED}. */
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
