package io.mooncake4j.memory;

import java.util.Locale;

/** How a worker's KV caches are carved out of host or device memory. */
public enum KvCacheLayout {
    /**
     * vLLM's unified layout: one tensor per layer, K and V fused inside each block
     * ({@code (num_blocks, 2, block_size, heads, head)}); one storage per layer.
     */
    FUSED("fused"),
    /**
     * FlashAttention's {@code (2, num_blocks, ...)} per layer viewed block-first: a block's K
     * and V halves are {@code num_blocks} half-pages apart, so each layer gives two regions.
     */
    SPLIT_KV("split-kv"),
    /** One latent tensor per layer (DeepSeek MLA). */
    MLA("mla"),
    /** All layers carved out of one storage (cross-layer allocation): a single registration. */
    SHARED("shared");

    private final String cliName;

    KvCacheLayout(String cliName) {
        this.cliName = cliName;
    }

    /** {@return the name used on the command line} */
    public String cliName() {
        return cliName;
    }

    /**
     * The layout called {@code name}.
     *
     * @param name a layout name, as the CLI flags spell it
     * @return the layout
     * @throws IllegalArgumentException when no layout has that name
     */
    public static KvCacheLayout byName(String name) {
        for (KvCacheLayout l : values()) {
            if (l.cliName.equalsIgnoreCase(name) || l.name().equalsIgnoreCase(name)) {
                return l;
            }
        }
        throw new IllegalArgumentException(String.format(Locale.ROOT,
                "unknown layout '%s'; expected fused, split-kv, mla or shared", name));
    }
}
