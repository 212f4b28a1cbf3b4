package io.mooncake4j.engine.rdma.verbs;

/**
 * RTR→RTS attributes of an RC QP.
 *
 * @param timeout     {@code timeout}
 * @param retryCnt    {@code retry_cnt}
 * @param rnrRetry    {@code rnr_retry}
 * @param sqPsn       {@code sq_psn}
 * @param maxRdAtomic {@code max_rd_atomic}
 */
public record RtsAttributes(int timeout, int retryCnt, int rnrRetry, int sqPsn, int maxRdAtomic) {

    /** Mooncake's values: {@code timeout 14, retry_cnt 7, rnr_retry 7, sq_psn 0, max_rd_atomic 16}. */
    public static RtsAttributes mooncake() {
        return new RtsAttributes(14, 7, 7, 0, 16);
    }
}
