package io.mooncake4j.connector.wire;

import io.mooncake4j.connector.ConnectorException;

/**
 * A side-channel message that cannot be decoded: malformed msgpack, a limit exceeded, a missing
 * required key or a value of the wrong type. The P side answers such a message with an
 * {@code ERROR} response carrying this exception's message (vLLM answers a
 * {@code msgspec.ValidationError} the same way).
 */
public class ProtocolException extends ConnectorException {

    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }

    public ProtocolException(String message, Throwable cause) {
        super(message, cause);
    }
}
