package io.mooncake4j.metadata;

import io.mooncake4j.MooncakeException;

/** A metadata store that could not be reached, refused a request, or answered something unusable. */
public final class MetadataException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    /**
     * @param message what happened, naming the key and the store
     * @param cause   the underlying error, or null
     */
    public MetadataException(String message, Throwable cause) {
        super(message, cause);
    }
}
