package io.mooncake4j;

/** An invalid configuration value; the message names the key and the value that was rejected. */
public final class MooncakeConfigException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    private final String key;

    public MooncakeConfigException(String key, String message) {
        super(message);
        this.key = key;
    }

    public MooncakeConfigException(String key, String message, Throwable cause) {
        super(message, cause);
        this.key = key;
    }

    /** {@return the configuration key (JSON path or environment variable) whose value was rejected} */
    public String key() {
        return key;
    }
}
