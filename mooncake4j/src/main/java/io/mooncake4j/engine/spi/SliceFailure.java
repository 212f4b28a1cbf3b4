package io.mooncake4j.engine.spi;

/**
 * Why a transport failed a slice; decides whether the core retries it on the next capable
 * transport (TENT's fallback).
 */
public enum SliceFailure {
    /**
     * This transport cannot reach the peer at all (connection or QP bring-up failed, peer mapping
     * refused): the core retries the slice on the next capable transport and stops offering this
     * one to that peer until its descriptor is refreshed.
     */
    UNREACHABLE(true),
    /** The slice failed on this transport (lost connection, failed completion): retry on the next capable one. */
    TRANSIENT(true),
    /**
     * The peer refused the request itself (address outside its registered memory, length out of
     * range): final, no other transport would do better.
     */
    REJECTED(false),
    /** The slice ran past its deadline: final. */
    TIMEOUT(false);

    private final boolean retryable;

    SliceFailure(boolean retryable) {
        this.retryable = retryable;
    }

    /** Whether another transport may try the slice again. */
    public boolean retryable() {
        return retryable;
    }
}
