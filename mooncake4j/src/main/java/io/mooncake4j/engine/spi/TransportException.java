package io.mooncake4j.engine.spi;

/** A transport could not be installed or could not register a buffer; the message names the cause and the fix. */
public class TransportException extends Exception {
    private static final long serialVersionUID = 1L;

    public TransportException(String message) {
        super(message);
    }

    public TransportException(String message, Throwable cause) {
        super(message, cause);
    }
}
