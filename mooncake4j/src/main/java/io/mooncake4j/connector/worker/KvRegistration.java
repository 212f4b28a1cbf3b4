package io.mooncake4j.connector.worker;

import io.mooncake4j.memory.MemoryStorage;
import java.util.List;

/**
 * The result of {@link MooncakeConnectorWorker#registerKvCaches}: vLLM's per-region parallel lists
 * (index {@code i} of every list describes region {@code i}) and the storages registered with the
 * engine. Immutable.
 *
 * @param kvCachesBaseAddr       region base addresses ({@code kv_caches_base_addr})
 * @param blockLenPerLayer       region block strides in bytes ({@code block_len_per_layer})
 * @param kvBlockLenPerLayer     bytes transferred per block ({@code kv_block_len_per_layer})
 * @param registeredLayerNames   layer name of each region ({@code registered_layer_names})
 * @param registeredLayerIndices layer index of each region ({@code registered_layer_indices})
 * @param registeredGroupIndices KV-cache group of each region ({@code registered_group_indices})
 * @param storages               the registered storages, deduplicated by base address in first-seen
 *                               order ({@code seen_base_addresses})
 */
public record KvRegistration(
        List<Long> kvCachesBaseAddr,
        List<Long> blockLenPerLayer,
        List<Long> kvBlockLenPerLayer,
        List<String> registeredLayerNames,
        List<Integer> registeredLayerIndices,
        List<Integer> registeredGroupIndices,
        List<MemoryStorage> storages) {

    /** Keeps unmodifiable copies of the collections. */
    public KvRegistration {
        kvCachesBaseAddr = List.copyOf(kvCachesBaseAddr);
        blockLenPerLayer = List.copyOf(blockLenPerLayer);
        kvBlockLenPerLayer = List.copyOf(kvBlockLenPerLayer);
        registeredLayerNames = List.copyOf(registeredLayerNames);
        registeredLayerIndices = List.copyOf(registeredLayerIndices);
        registeredGroupIndices = List.copyOf(registeredGroupIndices);
        storages = List.copyOf(storages);
        int n = kvCachesBaseAddr.size();
        if (blockLenPerLayer.size() != n || kvBlockLenPerLayer.size() != n || registeredLayerNames.size() != n
                || registeredLayerIndices.size() != n || registeredGroupIndices.size() != n) {
            throw new IllegalArgumentException("per-region lists must have equal lengths");
        }
    }

    /** {@return number of transfer regions} */
    public int regionCount() {
        return kvCachesBaseAddr.size();
    }

    /** {@return base addresses of the registered storages ({@code seen_base_addresses})} */
    public List<Long> seenBaseAddresses() {
        return storages.stream().map(MemoryStorage::address).toList();
    }
}
