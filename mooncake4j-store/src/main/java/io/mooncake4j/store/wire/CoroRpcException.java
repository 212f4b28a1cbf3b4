package io.mooncake4j.store.wire;

import java.util.Locale;

/** A coro_rpc call that produced no result: why, and for a server-side error its code and message. */
public final class CoroRpcException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** Why a call failed. */
    public enum Kind {
        /** No reply before the call's deadline (the call may still have been applied). */
        TIMEOUT,
        /** Connecting failed, or the connection was lost or closed while the call was pending. */
        CONNECTION,
        /** The reply stream broke the protocol (bad magic, oversized frame, undecodable body). */
        PROTOCOL,
        /** The server answered with a non-zero coro_rpc error code. */
        REMOTE,
        /** The client was closed, or too many calls were in flight. */
        REJECTED
    }

    private final Kind kind;
    private final int remoteCode;

    /**
     * A failure of {@code kind}.
     *
     * @param kind       why
     * @param remoteCode the coro_rpc error code for {@link Kind#REMOTE}, else 0
     * @param message    what happened
     * @param cause      the underlying error, or null
     */
    public CoroRpcException(Kind kind, int remoteCode, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
        this.remoteCode = remoteCode;
    }

    /** {@return why the call failed} */
    public Kind kind() {
        return kind;
    }

    /** {@return coro_rpc's error code for {@link Kind#REMOTE} (4 invalid arguments, 11 not registered, ...), else 0} */
    public int remoteCode() {
        return remoteCode;
    }

    /** {@return coro_rpc's name for a server error code ({@code include/ylt/coro_rpc/impl/errno.h})} */
    public static String remoteCodeName(int code) {
        return switch (code) {
            case 0 -> "ok";
            case 1 -> "io_error";
            case 2 -> "not_connected";
            case 3 -> "timed_out";
            case 4 -> "invalid_rpc_arguments";
            case 5 -> "address_in_used";
            case 6 -> "bad_address";
            case 7 -> "open_error";
            case 8 -> "listen_error";
            case 9 -> "operation_canceled";
            case 10 -> "rpc_throw_exception";
            case 11 -> "function_not_registered";
            case 12 -> "protocol_error";
            case 13 -> "unknown_protocol_version";
            case 14 -> "message_too_large";
            case 15 -> "server_has_ran";
            case 16 -> "invalid_rpc_result";
            case 17 -> "serial_number_conflict";
            default -> String.format(Locale.ROOT, "errc %d", code);
        };
    }
}
