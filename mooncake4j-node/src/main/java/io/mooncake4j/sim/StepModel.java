package io.mooncake4j.sim;

import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;

import java.util.List;
import java.util.function.IntConsumer;

/**
 * A real model behind a {@link SimEngine}'s step loop, in place of the {@link SyntheticModel}: the
 * engine schedules, allocates blocks, caches prefixes and drives the connector exactly as for the
 * synthetic model; the model computes the scheduled positions of each request and picks its next token.
 *
 * <p>The engine's blocks are the KV of record: after {@link #forward} the K and V rows of the
 * computed positions are in the request's blocks, in the fused layout of {@link #kvShape}
 * ({@code (2, block_size, kv_heads, head_size)} per block and layer, the model's working dtype), so
 * that the connector can send them (P), a later request can reuse them (prefix cache), and a request
 * whose KV arrived from P ({@code [0, from)} written by the transfer engine) can continue on them (D).
 * How a model keeps its own working copy between steps is its business; whatever it keeps must agree
 * with the blocks.
 *
 * <p><b>Threading:</b> every method but {@link #kvShape} is called on the engine's step-loop thread
 * only; one model instance serves one engine.
 */
public interface StepModel extends AutoCloseable {

    /**
     * The KV shape of the engine's blocks for this model (tensor-parallel size 1).
     *
     * @param blockSize tokens per block
     */
    ModelPreset kvShape(int blockSize);

    /** Told the engine's KV caches once, before the first {@link #forward}; the engine owns the memory. */
    void bind(KvCaches caches);

    /**
     * Computes positions {@code [from, to)} of a request and returns the token that follows position
     * {@code to - 1}. On entry the KV of positions {@code [0, from)} is in the blocks (computed by an
     * earlier step, found in the prefix cache, or received from a P node); on return so is
     * {@code [from, to)}.
     *
     * @param requestId the engine's request id (a model may keep per-request state until {@link #release})
     * @param tokens    the request's tokens so far, at least {@code to} of them (prompt, then output)
     * @param blockIds  the request's block ids of KV group 0, in position order
     * @param from      the first position to compute, {@code 0 <= from < to}
     * @param to        one past the last position to compute
     * @return the next token
     */
    int forward(String requestId, int[] tokens, int[] blockIds, int from, int to);

    /**
     * What this model's KV means (architecture, shapes, dtype, a digest of the weights), or null when
     * it cannot tell. A D engine refuses a request whose {@code kv_transfer_params} carry P's layout
     * ({@link SimEngine#KV_LAYOUT_PARAM}) when it differs from this.
     */
    default String kvLayout() {
        return null;
    }

    /**
     * One request's share of a layer-by-layer pass: the arguments of {@link #forward}.
     *
     * @param requestId the engine's request id
     * @param tokens    the request's tokens so far
     * @param blockIds  its block ids of KV group 0, in position order
     * @param from      the first position to compute
     * @param to        one past the last position to compute
     */
    record Work(String requestId, int[] tokens, int[] blockIds, int from, int to) {}

    /**
     * Whether the model can be driven layer by layer ({@link #forwardLayerwise}); the engine pushes
     * each layer's KV while the next computes only then ({@code layerwise_push}).
     */
    default boolean layerwise() {
        return false;
    }

    /**
     * Computes every request of {@code work} as {@link #forward} does, layer-major: layer {@code l} of
     * every request, then {@code layerDone.accept(l)}, then layer {@code l + 1}. When {@code layerDone}
     * is told {@code l}, the K and V rows of layer {@code l} of every request's positions
     * {@code [from, to)} are in its blocks, so the connector may send them while the next layer computes.
     * The tokens equal those of {@link #forward} called per request.
     *
     * @return the next token of each request, in {@code work}'s order
     * @throws UnsupportedOperationException when {@link #layerwise()} is false
     */
    default int[] forwardLayerwise(List<Work> work, IntConsumer layerDone) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot be driven layer by layer");
    }

    /** The request finished (any status): drop whatever the model keeps for it. Unknown ids are ignored. */
    void release(String requestId);

    /** Drops every request's state; the engine calls it when it closes. */
    @Override
    void close();
}
