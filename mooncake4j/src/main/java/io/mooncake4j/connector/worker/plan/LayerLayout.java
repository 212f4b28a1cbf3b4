package io.mooncake4j.connector.worker.plan;

/**
 * The facts about a local layer's KV spec that vLLM's {@code _validate_head_resharding_layout}
 * looks at (spec §6.10); the worker derives them from its {@code KvCacheSpec}s.
 *
 * @param attention  the layer's spec is an attention spec (full or sliding window)
 * @param paddedPage its page is padded ({@code page_size_bytes > unpadded_page_size_bytes})
 * @param nvfp4      its KV cache is NVFP4-quantised
 */
public record LayerLayout(boolean attention, boolean paddedPage, boolean nvfp4) {

    /** A plain, unpadded, unquantised attention layer. */
    public static final LayerLayout PLAIN_ATTENTION = new LayerLayout(true, false, false);
}
