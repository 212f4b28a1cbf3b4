package io.mooncake4j.store.wire;

/** A struct_pack message that cannot be decoded (or a value that cannot be encoded), with the reason. */
public final class StructPackException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /**
     * An error with {@code message}.
     *
     * @param message what is wrong with the bytes
     */
    public StructPackException(String message) {
        super(message);
    }
}
