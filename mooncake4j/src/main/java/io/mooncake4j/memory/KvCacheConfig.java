package io.mooncake4j.memory;

import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The KV-cache configuration of a worker (vLLM {@code KVCacheConfig}): its groups, in order.
 * The index of a group in {@link #groups()} is its transfer-group index.
 *
 * @param groups the KV-cache groups, in order
 */
public record KvCacheConfig(List<KvCacheGroup> groups) {

    /**
     * Copies the groups and checks that no layer is in two of them.
     *
     * @throws IllegalArgumentException when a layer is in two groups
     */
    public KvCacheConfig {
        groups = List.copyOf(groups);
        Map<String, Integer> seen = new HashMap<>();
        for (int g = 0; g < groups.size(); g++) {
            for (String layer : groups.get(g).layerNames()) {
                Integer prev = seen.put(layer, g);
                if (prev != null) {
                    throw new IllegalArgumentException("layer '" + layer + "' appears in groups " + prev + " and " + g);
                }
            }
        }
    }

    /**
     * A configuration of {@code groups}, in order.
     *
     * @param groups the KV-cache groups
     * @return the configuration
     */
    public static KvCacheConfig of(KvCacheGroup... groups) {
        return new KvCacheConfig(List.of(groups));
    }

    /**
     * {@return the spec of a layer, or empty when no group lists it (vLLM skips such layers)}
     *
     * @param layerName the layer's name, as in the KV-cache tensors map
     */
    public Optional<KvCacheSpec> specOf(String layerName) {
        for (KvCacheGroup g : groups) {
            if (g.layerNames().contains(layerName)) {
                return Optional.of(g.specOf(layerName));
            }
        }
        return Optional.empty();
    }

    /** {@return vLLM's {@code transfer_group_index_by_layer}} */
    public Map<String, Integer> transferGroupIndexByLayer() {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (int g = 0; g < groups.size(); g++) {
            for (String layer : groups.get(g).layerNames()) {
                out.put(layer, g);
            }
        }
        return Collections.unmodifiableMap(out);
    }

    /** {@return whether any group is not full attention (vLLM's HMA rule at the target)} */
    public boolean hasNonFullAttentionGroup() {
        return groups.stream().anyMatch(g -> g.spec().kind() != KvCacheSpec.Kind.FULL_ATTENTION);
    }
}
