package io.mooncake4j.sim;

import java.util.SplittableRandom;

/**
 * Synthetic prompts: request {@code i} has {@code sharedPrefixTokens} tokens common to every
 * request (a "system prompt", so engines see prefix-cache hits), then tokens of its own.
 * Deterministic for a seed.
 *
 * @param promptTokens       tokens per prompt
 * @param sharedPrefixTokens leading tokens shared by all prompts (at most promptTokens)
 * @param seed               random seed
 */
public record Workload(int promptTokens, int sharedPrefixTokens, long seed) {

    /** Token ids are below this (a vocabulary of 128k). */
    public static final int VOCAB = 128_000;

    public Workload {
        if (promptTokens <= 0 || sharedPrefixTokens < 0 || sharedPrefixTokens > promptTokens) {
            throw new IllegalArgumentException("need 0 <= sharedPrefixTokens <= promptTokens and promptTokens > 0, got "
                    + sharedPrefixTokens + " and " + promptTokens);
        }
    }

    /** The prompt of request {@code index}. */
    public int[] prompt(int index) {
        int[] out = new int[promptTokens];
        SplittableRandom shared = new SplittableRandom(seed);
        for (int i = 0; i < sharedPrefixTokens; i++) {
            out[i] = shared.nextInt(VOCAB);
        }
        SplittableRandom own = new SplittableRandom(seed ^ (0x9E3779B97F4A7C15L * (index + 1)));
        for (int i = sharedPrefixTokens; i < promptTokens; i++) {
            out[i] = own.nextInt(VOCAB);
        }
        return out;
    }
}
