package io.mooncake4j.metadata;

import java.util.Optional;

/**
 * A key-value store of JSON texts, as Mooncake's {@code MetadataStoragePlugin}: keys are plain
 * strings such as {@code mooncake/ram/127.0.0.1:15001}, values one JSON document each.
 * Implementations are thread-safe; every call is bounded in time and in the bytes it accepts.
 */
public interface MetadataStore extends AutoCloseable {

    /**
     * @param key the key
     * @return the value, or empty when the key is absent
     * @throws MetadataException when the store cannot be asked or answers an error
     */
    Optional<String> get(String key);

    /**
     * Sets {@code key} to {@code json}.
     *
     * @throws MetadataException when the store refuses or cannot be reached
     */
    void put(String key, String json);

    /**
     * Removes {@code key}.
     *
     * @return true when it was there
     * @throws MetadataException when the store cannot be reached or answers an error
     */
    boolean delete(String key);

    /** Releases the connections. */
    @Override
    void close();
}
