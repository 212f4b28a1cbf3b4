package io.mooncake4j.sim;

import io.mooncake4j.connector.scheduler.Request;
import io.mooncake4j.connector.scheduler.RequestStatus;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntConsumer;

/**
 * A request inside a {@link SimEngine}: vLLM's {@code Request} reduced to what the step loop and
 * the connector need. Confined to the engine's step-loop thread once submitted.
 */
final class SimRequest implements Request {

    final String id;
    final int[] prompt;
    final int maxTokens;
    private final Map<String, Object> params;
    final CompletableFuture<SimResult> future = new CompletableFuture<>();
    final long arrivalNanos = System.nanoTime();

    RequestStatus status = RequestStatus.WAITING;
    /** Prompt tokens followed by generated tokens' prefix hashes: hashes[i] covers tokens 0..i. */
    long[] hashes;
    int numTokens;
    int numComputedTokens;
    int[] output;
    int numOutput;
    /** Block ids per KV group (all groups have the same block size here). */
    int[][] blocks;
    int numBlocks;
    /** Blocks reserved at admission for the decode tokens and not yet taken. */
    int reservedBlocks;
    int localHitTokens;
    int externalTokens;
    /** Blocks the remote engine writes (per group), for byte accounting. */
    int pulledBlocks;
    long bytesVerified;
    long mismatchedWords;
    String error;
    long kvReadyNanos;
    /** With {@link SimEngine.Sampling#KV}: the digest of the prompt's KV as read from the cache, once known. */
    long kvDigest;
    boolean kvDigestKnown;
    /** Called on the step loop with each generated token, or null. */
    IntConsumer onToken;
    /** With a {@link StepModel}: the token its last forward pass picked. */
    int modelToken;
    /** Set (step loop) when the request was aborted while its KV was being loaded: it ends when the load does. */
    String abortReason;

    SimRequest(String id, int[] prompt, int maxTokens, Map<String, Object> params, int groups) {
        this.id = id;
        this.prompt = prompt.clone();
        this.maxTokens = maxTokens;
        this.params = params == null ? null : new LinkedHashMap<>(params);
        this.hashes = Arrays.copyOf(SyntheticModel.prefixHashes(prompt), prompt.length + maxTokens);
        this.numTokens = prompt.length;
        this.output = new int[maxTokens];
        this.blocks = new int[groups][];
        Arrays.setAll(blocks, g -> new int[0]);
    }

    @Override
    public String requestId() {
        return id;
    }

    @Override
    public int numPromptTokens() {
        return prompt.length;
    }

    @Override
    public Map<String, Object> kvTransferParams() {
        return params;
    }

    @Override
    public RequestStatus status() {
        return status;
    }

    /** The prompt followed by the tokens generated so far. */
    int[] tokens() {
        int[] t = Arrays.copyOf(prompt, prompt.length + numOutput);
        System.arraycopy(output, 0, t, prompt.length, numOutput);
        return t;
    }

    /** Appends a sampled token; its prefix hash extends the chain. */
    void appendToken(int token) {
        output[numOutput++] = token;
        if (numTokens < hashes.length) {
            hashes[numTokens] = SyntheticModel.extend(hashes[numTokens - 1], token);
        }
        numTokens++;
    }

    /** Appends newly allocated blocks (one array per group, same length). */
    void addBlocks(int[][] perGroup) {
        for (int g = 0; g < blocks.length; g++) {
            int[] old = blocks[g];
            int[] add = perGroup[g];
            int[] n = Arrays.copyOf(old, old.length + add.length);
            System.arraycopy(add, 0, n, old.length, add.length);
            blocks[g] = n;
        }
        numBlocks += perGroup.length == 0 ? 0 : perGroup[0].length;
    }

    SimResult result(String engineId, long bytesPerBlockAllRanks) {
        return new SimResult(id, engineId, status, Arrays.copyOf(output, numOutput), prompt.length, localHitTokens,
                externalTokens, pulledBlocks * bytesPerBlockAllRanks, bytesVerified, mismatchedWords, error,
                arrivalNanos, kvReadyNanos, System.nanoTime());
    }
}
