package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import java.util.Locale;

/**
 * Layer-name helpers.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/model_executor/models/utils.py extract_layer_index</a>
 */
final class LayerNames {

    private LayerNames() {}

    /**
     * vLLM's {@code extract_layer_index}: the first dot-separated component of {@code layerName}
     * that is a decimal integer ({@code model.layers.12.self_attn.attn} gives 12).
     *
     * @throws ConnectorException when no component is an integer
     */
    public static int extractLayerIndex(String layerName) {
        int start = 0;
        int n = layerName.length();
        while (start <= n) {
            int end = layerName.indexOf('.', start);
            if (end < 0) {
                end = n;
            }
            if (end > start && end - start <= 9 && allDigits(layerName, start, end)) {
                return Integer.parseInt(layerName, start, end, 10);
            }
            start = end + 1;
        }
        throw new ConnectorException(String.format(Locale.ROOT,
                "cannot extract a layer index from layer name '%s': expected an integer component such as "
                        + "'model.layers.12.self_attn'", layerName));
    }

    private static boolean allDigits(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }
}
