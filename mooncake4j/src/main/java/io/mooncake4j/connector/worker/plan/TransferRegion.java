package io.mooncake4j.connector.worker.plan;

import java.util.Objects;

/**
 * One registered KV transfer region: a layer tensor view, one per-head slice of a
 * non-block-compact layer, or (Variant B) the K or V half of a block.
 *
 * @param layerName  the registered layer name, e.g. {@code model.layers.12.self_attn}
 * @param layerIndex the layer index extracted from the name
 * @param baseAddr   address of block 0 of this region
 * @param blockLen   byte stride between consecutive blocks
 * @param kvBlockLen bytes of a block that are transferred ({@code <= blockLen})
 * @param groupIndex KV transfer-group index of the layer
 * @see <a href="https://github.com/vllm-project/vllm">vLLM {@code mooncake_connector.py} {@code TransferRegion}</a>
 */
public record TransferRegion(String layerName, int layerIndex, long baseAddr, long blockLen, long kvBlockLen,
                             int groupIndex) {

    public TransferRegion {
        Objects.requireNonNull(layerName, "layerName");
    }

    /** A region in KV group 0. */
    public TransferRegion(String layerName, int layerIndex, long baseAddr, long blockLen, long kvBlockLen) {
        this(layerName, layerIndex, baseAddr, blockLen, kvBlockLen, 0);
    }
}
