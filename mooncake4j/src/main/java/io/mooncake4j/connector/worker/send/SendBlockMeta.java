package io.mooncake4j.connector.worker.send;

import java.util.concurrent.CompletableFuture;

/**
 * vLLM's {@code SendBlockMeta} (spec §3.3): one P transfer waiting to be pulled, keyed by
 * transfer id in the sender's {@code reqs_need_send}. Confined to the sender loop
 * ({@code mooncake-p-sender-0}); not thread-safe.
 *
 * <p>Differences: times are {@code long} nanoseconds of the sender's monotonic clock
 * ({@link Long#MAX_VALUE} for vLLM's {@code inf}); {@link #createdNanos} and {@link #waiters}
 * let a placeholder created by an early D pull expire (spec §15 #3 fixed).
 */
public final class SendBlockMeta {

    /** P's request id; {@code ""} for a placeholder created by an early D pull. */
    String pReqId;
    final String transferId;
    /** P's source blocks per KV group; empty until {@code request_finished}. */
    int[][] localBlockIds;
    /** Completed (on the sender loop) when the blocks are known. */
    final CompletableFuture<Void> ready = new CompletableFuture<>();
    /** When the entry expires if nothing pulls it; {@link Long#MAX_VALUE} until ready. */
    long expireNanos = Long.MAX_VALUE;
    /** When the entry was created (placeholder expiry). */
    final long createdNanos;
    /** D pulls that must succeed before P frees; 0 until the first ready pull resolves it. */
    int needSend;
    /** Successful pulls so far. */
    int sent;
    /** Pulls in flight; blocks expiry while positive. */
    int sending;
    /** D pulls now waiting for {@link #ready}; a placeholder does not expire while one waits. */
    int waiters;
    /** Layer-wise push state ({@code Layerwise}); null when the request is pushed whole. */
    Layerwise layerwise;
    /** Every D pull landed (layer-wise) before {@code request_finished}: report finished when it comes. */
    boolean sentEarly;

    SendBlockMeta(String pReqId, String transferId, int[][] localBlockIds, long createdNanos) {
        this.pReqId = pReqId;
        this.transferId = transferId;
        this.localBlockIds = localBlockIds;
        this.createdNanos = createdNanos;
    }

    boolean isPlaceholder() {
        return pReqId.isEmpty();
    }

    @Override
    public String toString() {
        return "SendBlockMeta[p_req_id=" + pReqId + ", transfer_id=" + transferId + ", ready=" + ready.isDone()
                + ", need_send=" + needSend + ", sent=" + sent + ", sending=" + sending + "]";
    }
}
