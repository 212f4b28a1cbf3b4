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

    /** The code {@code initialize} returned. */
    private final int returnCode;
    /** The hostname passed to {@code initialize}. */
    private final String hostname;
    /** The protocol passed to {@code initialize}. */
    private final String protocol;
    /** The device name passed to {@code initialize}. */
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

    /** {@return the hostname passed to {@code initialize}} */
    public String hostname() {
        return hostname;
    }

    /** {@return the protocol passed to {@code initialize}} */
    public String protocol() {
        return protocol;
    }

    /** {@return the device name passed to {@code initialize}} */
    public String deviceName() {
        return deviceName;
    }
}
