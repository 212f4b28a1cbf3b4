package io.mooncake4j.engine;

import io.mooncake4j.MooncakeException;

/** A control-path failure of the transfer engine (initialisation, handshake, configuration). */
public non-sealed class TransferEngineException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    public TransferEngineException(String message) {
        super(message);
    }

    public TransferEngineException(String message, Throwable cause) {
        super(message, cause);
    }
}
