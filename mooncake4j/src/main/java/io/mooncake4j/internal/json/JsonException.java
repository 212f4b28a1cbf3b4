package io.mooncake4j.internal.json;

/** Malformed JSON or a value JSON cannot hold. */
public final class JsonException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public JsonException(String message) {
        super(message);
    }

    public JsonException(String message, Throwable cause) {
        super(message, cause);
    }
}
