package io.mooncake4j.memory;

import java.util.Objects;

/**
 * The KV-cache spec of a layer or group, the part of vLLM's {@code KVCacheSpec} the connector uses.
 *
 * @param kind                  what kind of cache the layer has
 * @param blockSize             tokens per (logical) block
 * @param pageSizeBytes         bytes of one block of one layer, padding included
 * @param unpaddedPageSizeBytes bytes of one block without padding (equal to pageSizeBytes unless padded)
 * @param slidingWindow         window in tokens for {@link Kind#SLIDING_WINDOW}, 0 otherwise
 */
public record KvCacheSpec(Kind kind, int blockSize, long pageSizeBytes, long unpaddedPageSizeBytes, int slidingWindow) {

    /** Layer kinds that change how the connector treats a layer. */
    public enum Kind {
        /** Full attention (vLLM {@code FullAttentionSpec}, MLA included). */
        FULL_ATTENTION,
        /** Sliding-window attention (vLLM {@code SlidingWindowSpec}). */
        SLIDING_WINDOW,
        /** Mamba / GDN state (vLLM {@code MambaSpec}); not an attention spec. */
        MAMBA,
        /** DeepSeek K-pool tail (vLLM {@code KpoolTailSpec}). */
        KPOOL_TAIL;

        /** {@return vLLM's {@code isinstance(spec, AttentionSpec)}} */
        public boolean isAttention() {
            return this == FULL_ATTENTION || this == SLIDING_WINDOW || this == KPOOL_TAIL;
        }
    }

    /**
     * Checks the sizes.
     *
     * @throws IllegalArgumentException when a size is not positive or the unpadded page exceeds the page
     */
    public KvCacheSpec {
        Objects.requireNonNull(kind, "kind");
        if (blockSize <= 0) {
            throw new IllegalArgumentException("blockSize must be positive, got " + blockSize);
        }
        if (pageSizeBytes <= 0 || unpaddedPageSizeBytes <= 0 || unpaddedPageSizeBytes > pageSizeBytes) {
            throw new IllegalArgumentException("need 0 < unpaddedPageSizeBytes <= pageSizeBytes, got "
                    + unpaddedPageSizeBytes + " and " + pageSizeBytes);
        }
        if ((kind == Kind.SLIDING_WINDOW) != (slidingWindow > 0)) {
            throw new IllegalArgumentException("slidingWindow must be positive exactly for SLIDING_WINDOW specs");
        }
    }

    /**
     * {@return a full-attention spec with unpadded pages}
     *
     * @param blockSize     tokens per block
     * @param pageSizeBytes bytes of one block of one layer (its page)
     */
    public static KvCacheSpec fullAttention(int blockSize, long pageSizeBytes) {
        return new KvCacheSpec(Kind.FULL_ATTENTION, blockSize, pageSizeBytes, pageSizeBytes, 0);
    }

    /**
     * {@return a sliding-window spec with unpadded pages}
     *
     * @param blockSize     tokens per block
     * @param pageSizeBytes bytes of one block of one layer (its page)
     * @param window        the sliding window in tokens
     */
    public static KvCacheSpec slidingWindow(int blockSize, long pageSizeBytes, int window) {
        return new KvCacheSpec(Kind.SLIDING_WINDOW, blockSize, pageSizeBytes, pageSizeBytes, window);
    }

    /**
     * {@return a Mamba/GDN state spec}
     *
     * @param blockSize     tokens per block
     * @param pageSizeBytes bytes of one block of one layer (its page)
     */
    public static KvCacheSpec mamba(int blockSize, long pageSizeBytes) {
        return new KvCacheSpec(Kind.MAMBA, blockSize, pageSizeBytes, pageSizeBytes, 0);
    }
}
