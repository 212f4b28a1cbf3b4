package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;

/**
 * {@code TransferEngine.initialize} returned non-zero. The message is exactly vLLM's
 * {@value #MESSAGE}; the details are fields.
 */
public final class EngineInitializationException extends ConnectorException {

    private static final long serialVersionUID = 1L;

    /** vLLM's message, kept verbatim. */
    public static final String MESSAGE = "Mooncake Transfer Engine initialization failed.";

    private final int returnCode;
    private final String hostname;
    private final String protocol;
    private final String deviceName;

    EngineInitializationException(int returnCode, String hostname, String protocol, String deviceName) {
        super(MESSAGE);
        this.returnCode = returnCode;
        this.hostname = hostname;
        this.protocol = protocol;
        this.deviceName = deviceName;
    }

    /** {@return what {@code initialize} returned} */
    public int returnCode() {
        return returnCode;
    }

    public String hostname() {
        return hostname;
    }

    public String protocol() {
        return protocol;
    }

    public String deviceName() {
        return deviceName;
    }
}
