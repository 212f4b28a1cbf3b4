package io.mooncake4j;

/** An invalid configuration value; the message names the key and the value that was rejected. */
public final class MooncakeConfigException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    /** The configuration key at fault. */
    private final String key;

    /**
     * A bad configuration value.
     *
     * @param key     the configuration key (as vLLM spells it)
     * @param message what is wrong with its value
     */
    public MooncakeConfigException(String key, String message) {
        super(message);
        this.key = key;
    }

    /**
     * A bad configuration value with its cause.
     *
     * @param key     the configuration key (as vLLM spells it)
     * @param message what is wrong with its value
     * @param cause   the underlying error
     */
    public MooncakeConfigException(String key, String message, Throwable cause) {
        super(message, cause);
        this.key = key;
    }

    /** {@return the configuration key (JSON path or environment variable) whose value was rejected} */
    public String key() {
        return key;
    }
}
