package com.github.tjake.jlama.model;

import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;

import java.util.Optional;

/**
 * mooncake4j's seam into Jlama 0.8.4: one transformer block at a time. {@link AbstractModel} runs
 * every block of a forward pass in one call ({@code batchForward}, {@code forward}); a node that pushes
 * each layer's KV while the next layer computes needs to stop between blocks. The blocks and the
 * embedding are protected members of {@code AbstractModel}, reachable from this package only, so this
 * class lives here (our code, on the class path beside Jlama's jar; Jlama's jar is not sealed). It
 * does what {@code AbstractModel.forward(AbstractTensor, ...)} does, split at block boundaries:
 * embed, then each block in order, closing the block's input as Jlama does.
 *
 * <p>Stateless; callers keep the per-request tensors and KV buffers (Jlama's threading rules apply:
 * one thread drives one KV buffer).
 */
public final class Mooncake4jLayers {

    private Mooncake4jLayers() {}

    /** Prompt tokens per embedding batch in {@code batchForward} (Jlama's {@code jlama.max_batch_size}, default 256). */
    public static int maxBatchSize() {
        return Integer.getInteger("jlama.max_batch_size", 256);
    }

    /** The embeddings of {@code tokens} at positions from {@code startPos}, as {@code batchForward} makes them. */
    public static AbstractTensor embedBatch(AbstractModel m, int[] tokens, int startPos) {
        return m.embedInput.batchInputsToEmbeddings(tokens, startPos);
    }

    /** The embedding of one token at {@code pos}, as {@code forward(token, pos, kv)} makes it. */
    public static AbstractTensor embedOne(AbstractModel m, int token, int pos) {
        return m.embedInput.inputTokenToEmbedding(token, pos);
    }

    /** Blocks this model runs (Jlama's {@code layerEnd - layerStart}; the whole model when not distributed). */
    public static int blocks(AbstractModel m) {
        return m.transformerBlocks.length;
    }

    /**
     * Runs block {@code layer} over {@code input} (positions from {@code startPos}), writing that layer's
     * K and V rows into {@code kv}; closes {@code input} and returns the block's output.
     */
    public static AbstractTensor block(AbstractModel m, int layer, AbstractTensor input, int startPos,
            KvBufferCache.KvBuffer kv) {
        try {
            return m.transformerBlocks[layer].forward(input, startPos, kv, Optional.empty());
        } finally {
            input.close();
        }
    }
}
