package io.mooncake4j.connector;

import io.mooncake4j.MooncakeException;

/**
 * A control-path failure of the connector. Where vLLM raises a documented error, the message
 * starts with exactly vLLM's sentence.
 */
public class ConnectorException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    /**
     * An error with {@code message}.
     *
     * @param message what went wrong
     */
    public ConnectorException(String message) {
        super(message);
    }

    /**
     * An error with {@code message} caused by {@code cause}.
     *
     * @param message what went wrong
     * @param cause   the underlying error
     */
    public ConnectorException(String message, Throwable cause) {
        super(message, cause);
    }
}
