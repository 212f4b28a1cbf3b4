package io.mooncake4j.sim;

import io.mooncake4j.connector.scheduler.RequestStatus;

/**
 * How one request ended in a {@link SimEngine}: the engine's "HTTP response".
 *
 * @param requestId          the engine's request id
 * @param engineId           the engine that ran it
 * @param status             {@link RequestStatus#FINISHED_LENGTH_CAPPED} when it produced its
 *                           {@code max_tokens}, {@link RequestStatus#FINISHED_STOPPED} when
 *                           {@link SimEngine#stop} ended it earlier (a stop string, an end-of-sequence
 *                           token), {@link RequestStatus#FINISHED_ERROR} when its KV load failed or did
 *                           not verify
 * @param outputTokens       the tokens generated
 * @param promptTokens       prompt length
 * @param localHitTokens     prompt tokens found in the engine's own prefix cache
 * @param externalTokens     prompt tokens whose KV was loaded from a remote engine
 * @param bytesReceived      KV bytes the remote engine wrote into this engine's blocks (all ranks)
 * @param bytesVerified      KV bytes compared against the synthetic model (all ranks)
 * @param mismatchedWords    8-byte words that did not verify (0 unless something is wrong)
 * @param error              why the request failed, or {@code null}
 * @param arrivalNanos       {@link System#nanoTime()} when the engine accepted it
 * @param kvReadyNanos       when its KV was complete: prefill done (P or local) or load finished (D)
 * @param finishNanos        when it finished
 */
public record SimResult(
        String requestId,
        String engineId,
        RequestStatus status,
        int[] outputTokens,
        int promptTokens,
        int localHitTokens,
        int externalTokens,
        long bytesReceived,
        long bytesVerified,
        long mismatchedWords,
        String error,
        long arrivalNanos,
        long kvReadyNanos,
        long finishNanos) {

    /** Whether it produced its tokens (all of them, or up to a stop) with verified KV. */
    public boolean ok() {
        return (status == RequestStatus.FINISHED_LENGTH_CAPPED || status == RequestStatus.FINISHED_STOPPED)
                && error == null && mismatchedWords == 0;
    }
}
