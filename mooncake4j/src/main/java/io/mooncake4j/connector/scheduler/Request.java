package io.mooncake4j.connector.scheduler;

import java.util.Map;

/**
 * The view of one request that the embedder's scheduler gives the connector (the part of vLLM's
 * {@code Request} that {@code MooncakeConnectorScheduler} reads). Implemented by the embedder;
 * called on the scheduler thread only.
 */
public interface Request {

    /** {@return the request id, unique within this engine (vLLM's {@code request.request_id})} */
    String requestId();

    /**
     * The number of prompt token ids, vLLM's {@code len(request.prompt_token_ids or [])}: 0 when
     * the prompt was given only as embeddings. The remote-prefill token count is computed from it.
     *
     * @return the number of prompt tokens (0 when the prompt was given only as embeddings)
     */
    int numPromptTokens();

    /**
     * The request's {@code kv_transfer_params}, or {@code null} when it has none. Must be the
     * request's own mutable map, not a copy: the connector writes to it (it clears
     * {@code do_remote_prefill} after the first handling so that only one transfer happens per
     * request). Use {@link io.mooncake4j.connector.KvTransferParams} for typed access.
     *
     * @return the request's {@code kv_transfer_params}, or {@code null} when it has none
     */
    Map<String, Object> kvTransferParams();

    /** {@return the current status; read by {@code requestFinished}} */
    RequestStatus status();
}
