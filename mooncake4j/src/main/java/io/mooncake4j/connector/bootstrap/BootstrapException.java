package io.mooncake4j.connector.bootstrap;

import io.mooncake4j.connector.ConnectorException;

/**
 * A bootstrap registration or query that failed: the server answered with an error status,
 * answered something unreadable, or could not be reached before the deadline.
 */
public class BootstrapException extends ConnectorException {

    private static final long serialVersionUID = 1L;

    /** {@link #statusCode()} when no HTTP answer was received. */
    public static final int NO_RESPONSE = -1;

    private final int statusCode;
    private final String responseBody;

    public BootstrapException(String message, int statusCode, String responseBody, Throwable cause) {
        super(message, cause);
        this.statusCode = statusCode;
        this.responseBody = responseBody;
    }

    /** HTTP status of the server's answer, or {@link #NO_RESPONSE}. */
    public int statusCode() {
        return statusCode;
    }

    /** Body of the server's answer ({@code ""} when there was none). */
    public String responseBody() {
        return responseBody;
    }
}
