package io.mooncake4j.engine;

/**
 * The state of one task of a batch (Mooncake {@code TransferStatus}).
 *
 * @param code             {@link StatusCodes} of the query itself (0 = the query was valid)
 * @param state            the task state; {@link State#INVALID} when {@code code != 0}
 * @param transferredBytes bytes applied so far
 */
public record TransferStatus(int code, State state, long transferredBytes) {

    /** Mooncake's {@code TransferStatusEnum}; ordinal = C value. */
    public enum State {
        /** Submitted, not yet started. */
        WAITING,
        /** In flight. */
        PENDING,
        /** No such task, or the query was invalid. */
        INVALID,
        /** Cancelled before completion. */
        CANCELED,
        /** Every byte was applied. */
        COMPLETED,
        /** Did not complete in time. */
        TIMEOUT,
        /** Failed; the bytes at the destination are unspecified. */
        FAILED;

        /** {@return whether the state is final: completed, failed, timed out or cancelled} */
        public boolean isTerminal() {
            return this == COMPLETED || this == FAILED || this == TIMEOUT || this == CANCELED;
        }
    }

    /**
     * The answer to an invalid query.
     *
     * @param code the non-zero {@link StatusCodes} value saying why
     * @return a status in state {@link State#INVALID} with no bytes
     */
    public static TransferStatus invalid(int code) {
        return new TransferStatus(code, State.INVALID, 0);
    }
}
