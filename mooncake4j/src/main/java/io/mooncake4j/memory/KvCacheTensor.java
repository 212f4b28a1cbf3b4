package io.mooncake4j.memory;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * A KV-cache tensor as the connector sees it: a strided view onto a {@link MemoryStorage}
 * whose dimension 0 is the block index.
 *
 * <p>Block {@code b} starts at {@code dataAddress + b * blockStrideBytes} (vLLM's
 * {@code data_ptr()} and {@code stride(0) * element_size()}). When {@link #blockDense()} is true
 * each block is one dense byte range of {@link #blockBytes()} bytes (vLLM's
 * {@code is_non_overlapping_and_dense(cache[0])}). Otherwise a block consists of
 * {@link #subCount()} dense pieces (dimension 1 of the tensor: K and V halves, or KV heads),
 * piece {@code h} of block {@code b} at {@code dataAddress + b*blockStride + h*subStrideBytes},
 * each {@link #subBytes()} long; the connector then registers one transfer region per piece.
 *
 * <p>Immutable. Several tensors may view the same storage.
 *
 * @param storage          the backing allocation
 * @param dataAddress      address of block 0 (may be an offset into the storage)
 * @param numBlocks        number of blocks (dimension 0)
 * @param blockStrideBytes bytes between the starts of consecutive blocks
 * @param blockDense       whether one block is one dense byte range
 * @param blockBytes       bytes of one block when dense; total bytes of the pieces otherwise
 * @param subCount         number of dense pieces of a non-dense block (1 when dense)
 * @param subStrideBytes   bytes between the starts of consecutive pieces (0 when dense)
 * @param subBytes         dense bytes of one piece (equal to blockBytes when dense)
 */
public record KvCacheTensor(
        MemoryStorage storage,
        long dataAddress,
        int numBlocks,
        long blockStrideBytes,
        boolean blockDense,
        long blockBytes,
        int subCount,
        long subStrideBytes,
        long subBytes) {

    /**
     * Checks the geometry.
     *
     * @throws IllegalArgumentException when a count or size is not positive, or the blocks do not fit the storage
     */
    public KvCacheTensor {
        Objects.requireNonNull(storage, "storage");
        if (numBlocks <= 0) {
            throw new IllegalArgumentException("numBlocks must be positive, got " + numBlocks);
        }
        if (blockStrideBytes <= 0 || blockBytes <= 0 || subBytes <= 0 || subCount <= 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "strides and sizes must be positive: blockStride=%d blockBytes=%d subCount=%d subBytes=%d",
                    blockStrideBytes, blockBytes, subCount, subBytes));
        }
        if (blockDense && (subCount != 1 || subBytes != blockBytes)) {
            throw new IllegalArgumentException("a dense block has exactly one piece of blockBytes bytes");
        }
        if (!blockDense && (subCount < 2 || subStrideBytes < subBytes)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "a non-dense block needs >= 2 pieces whose stride (%d) is at least their size (%d)",
                    subStrideBytes, subBytes));
        }
        long span = extent(numBlocks, blockStrideBytes, blockDense ? blockBytes
                : Math.addExact(Math.multiplyExact((long) subCount - 1, subStrideBytes), subBytes));
        if (!storage.contains(dataAddress, span)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "tensor [0x%x, +%d) lies outside its storage [0x%x, +%d)",
                    dataAddress, span, storage.address(), storage.byteSize()));
        }
    }

    private static long extent(int numBlocks, long stride, long lastBlockSpan) {
        return Math.addExact(Math.multiplyExact((long) numBlocks - 1, stride), lastBlockSpan);
    }

    /**
     * {@return a tensor whose blocks are dense ranges of {@code blockBytes} bytes, {@code blockStrideBytes} apart}
     *
     * @param storage          the memory the tensor lies in
     * @param dataAddress      the address of block 0
     * @param numBlocks        the number of blocks
     * @param blockStrideBytes bytes from one block to the next
     * @param blockBytes       bytes of one block that are transferred
     */
    public static KvCacheTensor dense(MemoryStorage storage, long dataAddress, int numBlocks,
                                      long blockStrideBytes, long blockBytes) {
        return new KvCacheTensor(storage, dataAddress, numBlocks, blockStrideBytes, true, blockBytes,
                1, 0, blockBytes);
    }

    /**
     * {@return a contiguous tensor: dense blocks laid end to end, stride = block size}
     *
     * @param storage     the memory the tensor lies in
     * @param dataAddress the address of block 0
     * @param numBlocks   the number of blocks
     * @param blockBytes  bytes of one block that are transferred
     */
    public static KvCacheTensor contiguous(MemoryStorage storage, long dataAddress, int numBlocks, long blockBytes) {
        return dense(storage, dataAddress, numBlocks, blockBytes, blockBytes);
    }

    /**
     * A tensor whose blocks are {@code subCount} dense pieces {@code subStrideBytes} apart
     * (for example vLLM's FlashAttention layout {@code (2, num_blocks, ...)} viewed block-first:
     * the K piece and the V piece of a block are {@code num_blocks * half} bytes apart).
     *
     * @param storage          the memory the tensor lies in
     * @param dataAddress      the address of block 0
     * @param numBlocks        the number of blocks
     * @param blockStrideBytes bytes from one block to the next
     * @param subCount         pieces per block
     * @param subStrideBytes   bytes from one piece of a block to the next
     * @param subBytes         bytes of one piece
     * @return the tensor
     */
    public static KvCacheTensor strided(MemoryStorage storage, long dataAddress, int numBlocks,
                                        long blockStrideBytes, int subCount, long subStrideBytes, long subBytes) {
        return new KvCacheTensor(storage, dataAddress, numBlocks, blockStrideBytes, false,
                Math.multiplyExact((long) subCount, subBytes), subCount, subStrideBytes, subBytes);
    }

    /**
     * {@return address of block {@code block}}
     *
     * @param block the block index
     */
    public long blockAddress(int block) {
        Objects.checkIndex(block, numBlocks);
        return dataAddress + block * blockStrideBytes;
    }

    /**
     * The dense views that become transfer regions: this tensor itself when its blocks are dense,
     * otherwise one view per piece ({@code cache[:, h]} in vLLM).
     *
     * @return the dense views, this tensor itself when its blocks are dense
     */
    public List<KvCacheTensor> denseRegions() {
        if (blockDense) {
            return List.of(this);
        }
        List<KvCacheTensor> out = new ArrayList<>(subCount);
        for (int h = 0; h < subCount; h++) {
            out.add(dense(storage, dataAddress + h * subStrideBytes, numBlocks, blockStrideBytes, subBytes));
        }
        return List.copyOf(out);
    }
}
