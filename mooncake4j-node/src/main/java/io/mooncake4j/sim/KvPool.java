package io.mooncake4j.sim;

import io.mooncake4j.memory.KvCaches;
import java.util.Map;

/**
 * A shared KV pool beside the engine's own prefix cache, as vLLM's {@code MooncakeStoreConnector}
 * sits in its step loop: at admission the engine asks how many tokens beyond its local hit the pool
 * holds and loads those blocks into the request's fresh blocks before computing the rest; after a
 * prefill it hands the prompt's full blocks to the pool to save, keeping them from reuse until the
 * save released them. A load that fails for a block leaves that block and every later one to be
 * computed: the tokens are those of a run without the pool.
 *
 * <p><b>Threading:</b> every method but {@link #close} and {@link #counters} is called on the
 * engine's step-loop thread; {@code release} callbacks run on any thread.
 */
public interface KvPool extends AutoCloseable {

    /** Creates the pool over the engine's KV caches (TP 1), before the step loop starts. */
    @FunctionalInterface
    interface Factory {
        /**
         * @param caches    the engine's KV caches (the pool registers them with its store)
         * @param blockSize tokens per block
         */
        KvPool create(KvCaches caches, int blockSize);
    }

    /**
     * Tokens after the first {@code numComputed} (the local prefix-cache hit) that the pool holds for
     * this prompt, in whole blocks, never the whole prompt; 0 when the pool cannot tell.
     */
    int matchedTokens(String requestId, int[] prompt, int numComputed);

    /**
     * Loads the pool's blocks {@code [fromBlock, toBlock)} of the request into {@code blockIds} (the
     * request's block ids, in position order); returns how many leading blocks arrived whole.
     */
    int load(String requestId, int[] blockIds, int fromBlock, int toBlock);

    /**
     * Saves blocks {@code [fromBlock, toBlock)} of the request's prompt; {@code release} runs exactly
     * once (any thread) when the blocks may be overwritten. Never blocks on the store.
     */
    void save(String requestId, int[] blockIds, int fromBlock, int toBlock, Runnable release);

    /** The request finished (any status): drop what the pool keeps for it. */
    void requestFinished(String requestId);

    /** Counters for {@code /metrics} and the status line (name to value; any thread). */
    Map<String, Long> counters();

    /**
     * Waits for the saves in flight (bounded), then releases the pool's resources.
     *
     * @return true when no save can still read the KV memory (it may be freed)
     */
    boolean closeAndDrain();

    @Override
    default void close() {
        closeAndDrain();
    }
}
