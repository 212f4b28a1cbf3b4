package io.mooncake4j.memory;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.LongFunction;

/**
 * A worker's KV caches: per-layer tensors in layer order, the storages behind them, and the
 * {@link KvCacheConfig} that describes them. Built by {@link #allocate}; the memory belongs to
 * whatever allocated the storages.
 *
 * @param tensorsByLayer layer name to that layer's tensors (one fused tensor, or K and V), in layer order
 * @param config         the KV-cache groups (one full-attention group for the built-in layouts)
 * @param numBlocks      blocks per layer
 */
public record KvCaches(Map<String, List<KvCacheTensor>> tensorsByLayer, KvCacheConfig config, int numBlocks) {

    /** Keeps an unmodifiable copy of the layers and their tensors, in order. */
    public KvCaches {
        Map<String, List<KvCacheTensor>> copy = new LinkedHashMap<>();
        tensorsByLayer.forEach((k, v) -> copy.put(Objects.requireNonNull(k), List.copyOf(v)));
        tensorsByLayer = Collections.unmodifiableMap(copy);
        Objects.requireNonNull(config, "config");
    }

    /** {@return the distinct storages, in first-seen order} */
    public List<MemoryStorage> storages() {
        Set<MemoryStorage> seen = new LinkedHashSet<>();
        tensorsByLayer.values().forEach(ts -> ts.forEach(t -> seen.add(t.storage())));
        return List.copyOf(seen);
    }

    /** {@return total bytes of the distinct storages} */
    public long totalBytes() {
        return storages().stream().mapToLong(MemoryStorage::byteSize).sum();
    }

    /**
     * Carves KV caches for {@code preset} at tensor-parallel size {@code tp}, allocating storage
     * through {@code allocate} (a host allocator's {@code allocate}, or a device allocator).
     *
     * @param preset    the model
     * @param tp        the tensor-parallel size (each rank holds its share of the heads)
     * @param numBlocks the number of blocks
     * @param layout    how K and V are laid out
     * @param allocate  allocates storage of the given size
     * @return the KV caches; the caller frees the storages
     */
    public static KvCaches allocate(ModelPreset preset, int tp, int numBlocks, KvCacheLayout layout,
                                    LongFunction<? extends MemoryStorage> allocate) {
        Objects.requireNonNull(preset, "preset");
        Objects.requireNonNull(layout, "layout");
        if (numBlocks <= 0) {
            throw new IllegalArgumentException("numBlocks must be positive, got " + numBlocks);
        }
        if (layout == KvCacheLayout.MLA && !preset.mla()) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "model '%s' is not an MLA model; use --layout fused/split-kv/shared, or an MLA preset such as %s",
                    preset.name(), ModelPreset.DEEPSEEK_V2_LITE.name()));
        }
        if (preset.mla() && layout == KvCacheLayout.SPLIT_KV) {
            throw new IllegalArgumentException("MLA model '" + preset.name() + "' has no separate K and V");
        }
        long page = preset.pageBytes(tp);
        long half = preset.halfPageBytes(tp);
        long layerBytes = Math.multiplyExact(page, (long) numBlocks);
        Map<String, List<KvCacheTensor>> tensors = new LinkedHashMap<>();
        List<String> names = new ArrayList<>();
        MemoryStorage shared = layout == KvCacheLayout.SHARED
                ? allocate.apply(Math.multiplyExact(layerBytes, (long) preset.numLayers())) : null;
        for (int i = 0; i < preset.numLayers(); i++) {
            String name = preset.layerName(i);
            names.add(name);
            KvCacheTensor t = switch (layout) {
                case FUSED, MLA -> {
                    MemoryStorage s = allocate.apply(layerBytes);
                    yield KvCacheTensor.contiguous(s, s.address(), numBlocks, page);
                }
                case SHARED -> KvCacheTensor.contiguous(shared, shared.address() + i * layerBytes, numBlocks, page);
                case SPLIT_KV -> {
                    MemoryStorage s = allocate.apply(layerBytes);
                    yield KvCacheTensor.strided(s, s.address(), numBlocks, half, 2, half * numBlocks, half);
                }
            };
            tensors.put(name, List.of(t));
        }
        KvCacheConfig config = KvCacheConfig.of(new KvCacheGroup(names, KvCacheSpec.fullAttention(preset.blockSize(), page)));
        return new KvCaches(tensors, config, numBlocks);
    }
}
