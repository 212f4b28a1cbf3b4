package io.mooncake4j.connector;

import io.mooncake4j.MooncakeException;

/**
 * A control-path failure of the connector. Where vLLM raises a documented error, the message
 * starts with exactly vLLM's sentence.
 */
public non-sealed class ConnectorException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    public ConnectorException(String message) {
        super(message);
    }

    public ConnectorException(String message, Throwable cause) {
        super(message, cause);
    }
}
