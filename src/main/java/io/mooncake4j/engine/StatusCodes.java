package io.mooncake4j.engine;

/**
 * Mooncake's positive {@code Status::Code} values ({@code TE/include/common/base/status.h}),
 * returned by the asynchronous batch API. 0 is success.
 */
public final class StatusCodes {
    public static final int OK = 0;
    public static final int INVALID_ARGUMENT = 1;
    public static final int TOO_MANY_REQUESTS = 2;
    public static final int ADDRESS_NOT_REGISTERED = 3;
    public static final int BATCH_BUSY = 4;
    public static final int DEVICE_NOT_FOUND = 6;
    public static final int ADDRESS_OVERLAPPED = 7;
    public static final int NOT_SUPPORTED_TRANSPORT = 8;
    public static final int DNS = 101;
    public static final int SOCKET = 102;
    public static final int MALFORMED_JSON = 103;
    public static final int REJECT_HANDSHAKE = 104;
    public static final int METADATA = 200;
    public static final int ENDPOINT = 201;
    public static final int CONTEXT = 202;
    public static final int NUMA = 300;
    public static final int CLOCK = 301;
    public static final int MEMORY = 302;
    public static final int NOT_IMPLEMENTED = 999;

    private StatusCodes() {}
}
