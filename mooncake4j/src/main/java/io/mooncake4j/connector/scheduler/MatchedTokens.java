package io.mooncake4j.connector.scheduler;

/**
 * The answer of {@link MooncakeConnectorScheduler#getNumNewMatchedTokens}: vLLM's
 * {@code (num_external_computed_tokens, load_kv_async)}.
 *
 * @param numExternalTokens tokens beyond the local prefix-cache hit whose KV will come from outside
 * @param loadKvAsync       whether that KV arrives asynchronously (the request then waits for
 *                          {@code finished_recving} before it is scheduled)
 */
public record MatchedTokens(int numExternalTokens, boolean loadKvAsync) {

    /** {@code (0, False)}: nothing to load. */
    public static final MatchedTokens NONE = new MatchedTokens(0, false);
}
