package io.mooncake4j.memory;

import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One KV-cache group (vLLM {@code KVCacheGroupSpec}): layers that share a block table, with
 * their spec. {@code layerSpecs} may give a layer its own spec (uniform-type multi-spec groups);
 * layers absent from it use {@code spec}.
 *
 * @param layerNames the layers, in order
 * @param spec       the group's KV-cache spec
 * @param layerSpecs per-layer specs that differ from {@code spec}
 */
public record KvCacheGroup(List<String> layerNames, KvCacheSpec spec, Map<String, KvCacheSpec> layerSpecs) {

    /**
     * Copies the collections and checks that every per-layer spec names a layer of the group.
     *
     * @throws IllegalArgumentException when a per-layer spec names another layer
     */
    public KvCacheGroup {
        layerNames = List.copyOf(layerNames);
        Objects.requireNonNull(spec, "spec");
        layerSpecs = Map.copyOf(layerSpecs);
        for (String layer : layerSpecs.keySet()) {
            if (!layerNames.contains(layer)) {
                throw new IllegalArgumentException("layer spec given for '" + layer + "' which is not in the group");
            }
        }
    }

    /**
     * A group whose layers all have {@code spec}.
     *
     * @param layerNames the layers, in order
     * @param spec       their spec
     */
    public KvCacheGroup(List<String> layerNames, KvCacheSpec spec) {
        this(layerNames, spec, Map.of());
    }

    /**
     * {@return the spec of one layer of this group}
     *
     * @param layerName the layer's name, as in the KV-cache tensors map
     */
    public KvCacheSpec specOf(String layerName) {
        return layerSpecs.getOrDefault(layerName, spec);
    }
}
