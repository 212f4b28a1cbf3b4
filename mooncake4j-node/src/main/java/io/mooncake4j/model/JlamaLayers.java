package io.mooncake4j.model;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.model.TransformerBlock;
import com.github.tjake.jlama.model.functions.EmbedInput;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.util.Optional;

/**
 * mooncake4j's seam into Jlama 0.8.4: one transformer block at a time. {@link AbstractModel} runs
 * every block of a forward pass in one call ({@code batchForward}, {@code forward}); a node that pushes
 * each layer's KV while the next layer computes needs to stop between blocks. It does what
 * {@code AbstractModel.forward(AbstractTensor, ...)} does, split at block boundaries: embed, then each
 * block in order, closing the block's input as Jlama does.
 *
 * <p>The blocks and the embedding are protected fields of {@code AbstractModel}
 * ({@code transformerBlocks}, {@code embedInput}); this class reads them through getters from
 * {@link MethodHandles#privateLookupIn}, held in static finals so that the JIT inlines them like a field
 * read. That needs Jlama's package open to this module: an automatic module (jlama-core on the module
 * path) and the class path open all their packages. Nothing is written, no Jlama class is patched.
 *
 * <p>Stateless; callers keep the per-request tensors and KV buffers (Jlama's threading rules apply:
 * one thread drives one KV buffer).
 */
final class JlamaLayers {

    private static final MethodHandle EMBED_INPUT;
    private static final MethodHandle BLOCKS;

    static {
        try {
            MethodHandles.Lookup jlama = MethodHandles.privateLookupIn(AbstractModel.class, MethodHandles.lookup());
            EMBED_INPUT = jlama.findGetter(AbstractModel.class, "embedInput", EmbedInput.class);
            BLOCKS = jlama.findGetter(AbstractModel.class, "transformerBlocks", TransformerBlock[].class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(new IllegalStateException(
                    "this Jlama has no AbstractModel.embedInput / transformerBlocks (built for Jlama 0.8.4)", e));
        }
    }

    private JlamaLayers() {}

    /** Prompt tokens per embedding batch in {@code batchForward} (Jlama's {@code jlama.max_batch_size}, default 256). */
    static int maxBatchSize() {
        return Integer.getInteger("jlama.max_batch_size", 256);
    }

    /** The embeddings of {@code tokens} at positions from {@code startPos}, as {@code batchForward} makes them. */
    static AbstractTensor embedBatch(AbstractModel m, int[] tokens, int startPos) {
        return embedInput(m).batchInputsToEmbeddings(tokens, startPos);
    }

    /** The embedding of one token at {@code pos}, as {@code forward(token, pos, kv)} makes it. */
    static AbstractTensor embedOne(AbstractModel m, int token, int pos) {
        return embedInput(m).inputTokenToEmbedding(token, pos);
    }

    /**
     * Runs block {@code layer} over {@code input} (positions from {@code startPos}), writing that layer's
     * K and V rows into {@code kv}; closes {@code input} and returns the block's output.
     */
    static AbstractTensor block(AbstractModel m, int layer, AbstractTensor input, int startPos,
            KvBufferCache.KvBuffer kv) {
        try {
            return blocks(m)[layer].forward(input, startPos, kv, Optional.empty());
        } finally {
            input.close();
        }
    }

    private static EmbedInput embedInput(AbstractModel m) {
        try {
            return (EmbedInput) EMBED_INPUT.invokeExact(m);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t); // a field getter throws nothing checked
        }
    }

    private static TransformerBlock[] blocks(AbstractModel m) {
        try {
            return (TransformerBlock[]) BLOCKS.invokeExact(m);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t); // a field getter throws nothing checked
        }
    }
}
