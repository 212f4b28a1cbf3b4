package io.mooncake4j.connector;

import java.util.Arrays;
import java.util.Objects;

/**
 * One pull the D worker must make (vLLM's {@code PullReqMeta}, spec §3.2): the D request
 * {@code dReqId} receives the KV of {@code transferId} from engine {@code remoteEngineId} into
 * {@code localBlockIds} (per transfer group). Empty {@code localBlockIds} ({@link BlockIds#NONE})
 * means "release only": P is told it may free its blocks, nothing is written.
 *
 * <p>The identity fields are immutable; {@code localBlockIds} is copied at construction and
 * returned without copying (read-only by convention). The bookkeeping fields
 * ({@code expireTime}, {@code pullTasksCount}, {@code pullTasksTotal}, {@code failed}) are
 * mutable and belong to the D receiver loop once the metadata has been handed to the worker; they
 * are not synchronised.
 *
 * <p>Equality is by value over every field, as for vLLM's dataclass (tests compare metadata).
 */
public final class PullReqMeta {

    private final String dReqId;
    private final String transferId;
    private final int[][] localBlockIds;
    private final String remoteEngineId;
    private final String remoteBootstrapAddr;
    private double expireTime = Double.POSITIVE_INFINITY;
    private int pullTasksCount;
    private int pullTasksTotal;
    private boolean failed;

    /**
     * One request D pulls from P.
     *
     * @param dReqId              this (D) engine's request id
     * @param transferId          the rendezvous key shared with P
     * @param localBlockIds       destination block ids per transfer group (copied)
     * @param remoteEngineId      P's engine id
     * @param remoteBootstrapAddr base URL of P's bootstrap server
     */
    public PullReqMeta(String dReqId, String transferId, int[][] localBlockIds, String remoteEngineId,
            String remoteBootstrapAddr) {
        this.dReqId = Objects.requireNonNull(dReqId, "dReqId");
        this.transferId = Objects.requireNonNull(transferId, "transferId");
        this.localBlockIds = BlockIds.copyOf(localBlockIds);
        this.remoteEngineId = Objects.requireNonNull(remoteEngineId, "remoteEngineId");
        this.remoteBootstrapAddr = Objects.requireNonNull(remoteBootstrapAddr, "remoteBootstrapAddr");
    }

    /** {@return D's request id} */
    public String dReqId() {
        return dReqId;
    }

    /** {@return the transfer id shared with P} */
    public String transferId() {
        return transferId;
    }

    /** {@return destination block ids per transfer group; owned by this object, do not modify} */
    public int[][] localBlockIds() {
        return localBlockIds;
    }

    /** {@return P's engine id ({@code remote_engine_id})} */
    public String remoteEngineId() {
        return remoteEngineId;
    }

    /** {@return P's bootstrap server URL ({@code remote_bootstrap_addr})} */
    public String remoteBootstrapAddr() {
        return remoteBootstrapAddr;
    }

    /** {@return seconds on the worker's monotonic clock; {@code +inf} by default (unused by the reference code)} */
    public double expireTime() {
        return expireTime;
    }

    /**
     * Sets vLLM's {@code expire_time} of this pull.
     *
     * @param expireTime the value {@link #expireTime()} then answers
     */
    public void setExpireTime(double expireTime) {
        this.expireTime = expireTime;
    }

    /** {@return remote workers that still must report this request ok} */
    public int pullTasksCount() {
        return pullTasksCount;
    }

    /**
     * Sets the pulls still to finish.
     *
     * @param pullTasksCount the pulls left
     */
    public void setPullTasksCount(int pullTasksCount) {
        this.pullTasksCount = pullTasksCount;
    }

    /** {@return decrements {@link #pullTasksCount()} and returns the new value} */
    public int decrementPullTasksCount() {
        return --pullTasksCount;
    }

    /** {@return the pulls this request is split into (one per P rank it reads)} */
    public int pullTasksTotal() {
        return pullTasksTotal;
    }

    /**
     * Sets the pulls this request is split into.
     *
     * @param pullTasksTotal the pulls in all
     */
    public void setPullTasksTotal(int pullTasksTotal) {
        this.pullTasksTotal = pullTasksTotal;
    }

    /** {@return once set, later ok/err reports for this request are ignored} */
    public boolean failed() {
        return failed;
    }

    /**
     * Marks the request failed (or not).
     *
     * @param failed whether a pull of it failed
     */
    public void setFailed(boolean failed) {
        this.failed = failed;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PullReqMeta p
                && dReqId.equals(p.dReqId)
                && transferId.equals(p.transferId)
                && Arrays.deepEquals(localBlockIds, p.localBlockIds)
                && remoteEngineId.equals(p.remoteEngineId)
                && remoteBootstrapAddr.equals(p.remoteBootstrapAddr)
                && Double.compare(expireTime, p.expireTime) == 0
                && pullTasksCount == p.pullTasksCount
                && pullTasksTotal == p.pullTasksTotal
                && failed == p.failed;
    }

    /** Hashes the immutable identity fields only, so mutation of bookkeeping never moves it in a hash table. */
    @Override
    public int hashCode() {
        return Objects.hash(dReqId, transferId, remoteEngineId, remoteBootstrapAddr);
    }

    @Override
    public String toString() {
        return "PullReqMeta[dReqId=" + dReqId + ", transferId=" + transferId + ", localBlockIds="
                + BlockIds.toString(localBlockIds) + ", remoteEngineId=" + remoteEngineId
                + ", remoteBootstrapAddr=" + remoteBootstrapAddr + ", expireTime=" + expireTime
                + ", pullTasksCount=" + pullTasksCount + ", pullTasksTotal=" + pullTasksTotal
                + ", failed=" + failed + "]";
    }
}
