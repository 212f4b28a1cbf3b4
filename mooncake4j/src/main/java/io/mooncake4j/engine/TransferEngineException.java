package io.mooncake4j.engine;

import io.mooncake4j.MooncakeException;

/** A control-path failure of the transfer engine (initialisation, handshake, configuration). */
public class TransferEngineException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    /**
     * An exception with a message only.
     *
     * @param message what failed and, where known, how to fix it
     */
    public TransferEngineException(String message) {
        super(message);
    }

    /**
     * An exception with the failure that caused it.
     *
     * @param message what failed and, where known, how to fix it
     * @param cause   the underlying failure
     */
    public TransferEngineException(String message, Throwable cause) {
        super(message, cause);
    }
}
