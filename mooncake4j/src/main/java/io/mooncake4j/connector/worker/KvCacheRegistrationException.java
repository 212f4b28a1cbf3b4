package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import java.util.List;
import java.util.OptionalLong;

/**
 * {@code batchRegisterMemory} kept failing. The message starts with exactly vLLM's
 * {@value #MESSAGE} followed by the details, which are also available as fields.
 */
public final class KvCacheRegistrationException extends ConnectorException {

    private static final long serialVersionUID = 1L;

    /** vLLM's first sentence, kept verbatim. */
    public static final String MESSAGE = "Mooncake batch memory registration failed.";

    /** The code the engine returned. */
    private final int returnCode;
    /** Registration attempts made. */
    private final int attempts;
    /** Bytes to register. */
    private final long totalBytes;
    /** Whether the memlock limit could be read. */
    private final boolean memlockKnown;
    /** The soft RLIMIT_MEMLOCK, when known. */
    private final long memlockLimit;
    /** Locations of the storages. */
    private final String[] locations;

    KvCacheRegistrationException(String details, int returnCode, int attempts, long totalBytes,
                                 OptionalLong memlockLimit, List<String> locations) {
        super(MESSAGE + " " + details);
        this.returnCode = returnCode;
        this.attempts = attempts;
        this.totalBytes = totalBytes;
        this.memlockKnown = memlockLimit.isPresent();
        this.memlockLimit = memlockLimit.orElse(0);
        this.locations = locations.toArray(String[]::new);
    }

    /** {@return the engine's return code of the last attempt} */
    public int returnCode() {
        return returnCode;
    }

    /** {@return how many times {@code batchRegisterMemory} was called} */
    public int attempts() {
        return attempts;
    }

    /** {@return bytes of all storages that were to be registered} */
    public long totalBytes() {
        return totalBytes;
    }

    /**
     * The soft {@code RLIMIT_MEMLOCK} in bytes ({@link io.mooncake4j.internal.sys.ResourceLimits#UNLIMITED}
     * = -1 for none), empty when it could not be read.
     *
     * @return the soft {@code RLIMIT_MEMLOCK} in bytes (-1: unlimited), empty when it could not be read
     */
    public OptionalLong memlockLimit() {
        return memlockKnown ? OptionalLong.of(memlockLimit) : OptionalLong.empty();
    }

    /** {@return the distinct locations of the storages ({@code cpu:0}, {@code cuda:1}, ...), in first-seen order} */
    public List<String> locations() {
        return List.of(locations);
    }
}
