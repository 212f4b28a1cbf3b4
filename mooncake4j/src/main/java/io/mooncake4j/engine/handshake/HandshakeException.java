package io.mooncake4j.engine.handshake;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngineException;

/** A failed handshake request, with the Mooncake {@link ErrorCodes} value a C++ client would report. */
public final class HandshakeException extends TransferEngineException {

    private static final long serialVersionUID = 1L;

    private final int errorCode;

    public HandshakeException(int errorCode, String message, Throwable cause) {
        super(message + " (" + ErrorCodes.name(errorCode) + ")", cause);
        this.errorCode = errorCode;
    }

    public HandshakeException(int errorCode, String message) {
        this(errorCode, message, null);
    }

    /** {@link ErrorCodes#DNS}, {@link ErrorCodes#SOCKET}, {@link ErrorCodes#MALFORMED_JSON}, {@link ErrorCodes#METADATA}. */
    public int errorCode() {
        return errorCode;
    }
}
