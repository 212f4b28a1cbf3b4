package io.mooncake4j.store.connector;

import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.MemoryStorage;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Where one KV-cache group's blocks lie: the value of a block is its slice of every region, in
 * region order (vLLM's {@code ChunkedTokenDatabase.prepare_value_for_block}): one region per layer
 * when a block holds K and V together (the fused layout), K and V regions of each layer in turn when
 * they are apart. The stored bytes carry no header: the namespace and the model imply the layout.
 *
 * @param numBlocks blocks per region
 * @param regions   the regions, in vLLM's registration order
 * @param storages  the distinct memory behind the regions (each registered with the store once)
 */
public record KvLayout(int numBlocks, List<Region> regions, List<MemoryStorage> storages) {

    /**
     * Block {@code b}'s slice of a region starts at {@code base + b * stride} and is {@code blockLen} bytes.
     *
     * @param base     address of block 0's slice
     * @param stride   bytes from one block's slice to the next
     * @param blockLen bytes of one block's slice
     */
    public record Region(long base, long stride, long blockLen) {
        /** Checks the values. */
        public Region {
            if (base == 0 || stride <= 0 || blockLen <= 0 || blockLen > stride) {
                throw new IllegalArgumentException("bad region: base " + base + ", stride " + stride + ", len " + blockLen);
            }
        }
    }

    /** Copies and checks. */
    public KvLayout {
        if (numBlocks <= 0) {
            throw new IllegalArgumentException("numBlocks must be positive, got " + numBlocks);
        }
        regions = List.copyOf(regions);
        storages = List.copyOf(storages);
        if (regions.isEmpty()) {
            throw new IllegalArgumentException("a KV layout needs at least one region");
        }
    }

    /**
     * The layout of every layer of {@code caches} (one KV-cache group), in layer order.
     *
     * @param caches host KV caches of one group
     * @return their layout
     */
    public static KvLayout of(KvCaches caches) {
        Objects.requireNonNull(caches, "caches");
        if (caches.config().groups().size() != 1) {
            throw new IllegalArgumentException("the store connector handles one KV-cache group, these caches have "
                    + caches.config().groups().size());
        }
        List<Region> regions = new ArrayList<>();
        for (List<KvCacheTensor> layer : caches.tensorsByLayer().values()) {
            for (KvCacheTensor t : layer) {
                if (t.storage().isDevice()) {
                    // the store's TCP data path reads host memory only
                    throw new IllegalArgumentException("the store connector needs host KV caches, got " + t.storage().location());
                }
                if (t.blockDense()) {
                    regions.add(new Region(t.dataAddress(), t.blockStrideBytes(), t.blockBytes()));
                } else {
                    for (int s = 0; s < t.subCount(); s++) {
                        regions.add(new Region(t.dataAddress() + s * t.subStrideBytes(), t.blockStrideBytes(), t.subBytes()));
                    }
                }
            }
        }
        return new KvLayout(caches.numBlocks(), regions, caches.storages());
    }

    /** {@return bytes of one block's value} */
    public long blockBytes() {
        long n = 0;
        for (Region r : regions) {
            n += r.blockLen();
        }
        return n;
    }

    /**
     * {@return the start of each part of block {@code block}'s value}
     *
     * @param block the block id
     */
    public long[] addresses(int block) {
        Objects.checkIndex(block, numBlocks);
        long[] a = new long[regions.size()];
        for (int i = 0; i < a.length; i++) {
            Region r = regions.get(i);
            a[i] = r.base() + block * r.stride();
        }
        return a;
    }

    /** {@return the length of each part of a block's value} */
    public long[] sizes() {
        long[] s = new long[regions.size()];
        for (int i = 0; i < s.length; i++) {
            s[i] = regions.get(i).blockLen();
        }
        return s;
    }
}
