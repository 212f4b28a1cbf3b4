package io.mooncake4j.connector.scheduler;

import java.util.Map;

/**
 * The answer of {@link MooncakeConnectorScheduler#requestFinished}: vLLM's
 * {@code (delay_free_blocks, kv_transfer_params)}.
 *
 * @param delayFreeBlocks  true when the embedder must keep the request's blocks until the worker
 *                         reports its id in {@code finished_sending}
 * @param kvTransferParams params to return to the client; always {@code null} for Mooncake (unlike NIXL)
 */
public record RequestFinishedResult(boolean delayFreeBlocks, Map<String, Object> kvTransferParams) {

    /** {@code (False, None)}: free now. */
    public static final RequestFinishedResult FREE_NOW = new RequestFinishedResult(false, null);

    /** {@code (True, None)}: keep the blocks until the send finished or expired. */
    public static final RequestFinishedResult DELAY_FREE = new RequestFinishedResult(true, null);
}
