package io.mooncake4j;

/**
 * Root of every exception mooncake4j throws on the control path (initialisation, registration,
 * configuration, handshakes). The data path reports status codes instead.
 *
 * <p>The hierarchy is sealed at the top: each area has one non-sealed base class that its own
 * specialised exceptions extend.
 */
public abstract sealed class MooncakeException extends RuntimeException
        permits MooncakeConfigException,
                io.mooncake4j.engine.TransferEngineException,
                io.mooncake4j.memory.cuda.CudaException,
                io.mooncake4j.connector.ConnectorException,
                io.mooncake4j.metadata.MetadataException {

    private static final long serialVersionUID = 1L;

    /**
     * An error with {@code message}.
     *
     * @param message what went wrong
     */
    protected MooncakeException(String message) {
        super(message);
    }

    /**
     * An error with {@code message} caused by {@code cause}.
     *
     * @param message what went wrong
     * @param cause   the underlying error
     */
    protected MooncakeException(String message, Throwable cause) {
        super(message, cause);
    }
}
