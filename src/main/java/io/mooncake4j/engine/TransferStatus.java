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
        WAITING, PENDING, INVALID, CANCELED, COMPLETED, TIMEOUT, FAILED;

        public boolean isTerminal() {
            return this == COMPLETED || this == FAILED || this == TIMEOUT || this == CANCELED;
        }
    }

    public static TransferStatus invalid(int code) {
        return new TransferStatus(code, State.INVALID, 0);
    }
}
