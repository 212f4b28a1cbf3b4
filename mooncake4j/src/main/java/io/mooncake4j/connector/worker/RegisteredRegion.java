package io.mooncake4j.connector.worker;

/**
 * One transfer region: a dense per-block view of a layer (the whole layer tensor, or one piece of
 * it when its blocks are not dense). Regions are what transfers address; storages are what is
 * registered.
 *
 * @param layerName      the layer the region belongs to
 * @param layerIndex     {@link LayerNames#extractLayerIndex} of the layer name
 * @param groupIndex     the layer's KV-cache (transfer) group
 * @param baseAddress    address of block 0 of the region (vLLM's {@code kv_caches_base_addr[i]})
 * @param blockLen       bytes between consecutive blocks (vLLM's {@code block_len_per_layer[i]})
 * @param kvBlockLen     bytes transferred per block (vLLM's {@code kv_block_len_per_layer[i]}), at most blockLen
 * @param numBlocks      blocks in the region
 * @param storageAddress base address of the storage the region lies in
 */
public record RegisteredRegion(String layerName, int layerIndex, int groupIndex, long baseAddress, long blockLen,
                               long kvBlockLen, int numBlocks, long storageAddress) {
}
