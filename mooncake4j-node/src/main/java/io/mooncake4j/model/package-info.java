/**
 * The node's real model: Jlama behind the serving engine's model seam
 * ({@link io.mooncake4j.sim.StepModel}), and the tiny checkpoints the tests and the demo run on.
 *
 * <ul>
 *   <li>{@link io.mooncake4j.model.JlamaModel}: a checkpoint directory checked ({@code Checkpoints}: what
 *       is refused, with a message naming it) and loaded (weights, tokenizer, chat template, the KV shape
 *       of its blocks);</li>
 *   <li>{@link io.mooncake4j.model.HfTokenizer}: the checkpoint's {@code tokenizer.json} (byte-level or
 *       SentencePiece-style BPE), ours rather than Jlama's; {@code JlamaTokenizer} hands it and the chat
 *       template to Jlama's model;</li>
 *   <li>{@link io.mooncake4j.model.JlamaStepModel}: one per engine; computes the scheduled positions
 *       of each request in a Jlama KV buffer of its own and copies the rows between that buffer and
 *       the engine's registered blocks (docs/model.md: why a copy, what it costs);</li>
 *   <li>{@link io.mooncake4j.model.TinyModelWriter}: {@code bin/mooncake4j make-model --tiny DIR}, in each
 *       form a download comes in ({@link io.mooncake4j.model.TinyModelWriter.Variant}; tokenizer files by
 *       {@code TinyTokenizers}).</li>
 * </ul>
 *
 * <p>Layer-wise push drives Jlama one transformer block at a time through {@code JlamaLayers}, which
 * reads the two protected fields of Jlama's {@code AbstractModel} it needs (the blocks, the embedding)
 * through a private lookup into Jlama's package (open: jlama-core is an automatic module); nothing
 * else reaches into Jlama's internals.
 *
 * <p>{@link io.mooncake4j.model.JlamaModel#kvLayout()} fingerprints what a KV block means (shapes,
 * dtype, a digest of the checkpoint), {@link io.mooncake4j.model.JlamaStepModel#kvLayout()} adds the
 * tokenizer and the engine the block size; a D node refuses P's KV when P's layout differs (docs/model.md).
 * {@code ModelDemo} is {@code demo --model DIR} in this JVM; the {@code --processes} variant lives in
 * {@code io.mooncake4j.cli} beside the synthetic one.
 *
 * <p>Node code only: the library packages (connector, engine, memory) never load it, and the
 * Jlama jar and {@code --add-modules jdk.incubator.vector} are needed only where it runs.
 *
 * <p><b>Threading and ownership:</b> a {@code JlamaModel} owns the loaded weights and its working
 * directory, shared read-only by its step models; a {@code JlamaStepModel} and its KV buffers are
 * confined to its engine's step-loop thread (per-request sampling settings may be given from any
 * thread). Jlama's kernels run on Jlama's own shared thread pool.
 */
package io.mooncake4j.model;
