package io.mooncake4j;

/**
 * Root of every exception mooncake4j throws on the control path (initialisation, registration,
 * configuration, handshakes). The data path reports status codes instead.
 *
 * <p>Each area has one base class that its own specialised exceptions extend:
 * {@link MooncakeConfigException} here, {@code engine.TransferEngineException},
 * {@code memory.cuda.CudaException}, {@code connector.ConnectorException} and
 * {@code metadata.MetadataException}. The root is not sealed: a {@code permits} clause naming
 * those classes would make this package and theirs import each other (a cycle between packages);
 * the arrow runs one way, from each area to this root.
 */
public abstract class MooncakeException extends RuntimeException {

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
