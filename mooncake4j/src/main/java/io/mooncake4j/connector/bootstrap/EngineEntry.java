package io.mooncake4j.connector.bootstrap;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's {@code EngineEntry}: one data-parallel engine as the bootstrap server knows it.
 *
 * @param engineId   the engine's id
 * @param workerAddr tp_rank → (pp_rank → side-channel address), in registration order
 * @param kvLayout   what the engine's KV blocks mean ({@value RegisterWorkerPayload#KV_LAYOUT_KEY}, a
 *                   mooncake4j extension its workers register), or null when its workers registered none
 *                   (a vLLM P)
 */
public record EngineEntry(String engineId, Map<Integer, Map<Integer, String>> workerAddr, String kvLayout) {

    /** An entry without a KV layout (vLLM's shape). */
    public EngineEntry(String engineId, Map<Integer, Map<Integer, String>> workerAddr) {
        this(engineId, workerAddr, null);
    }

    public EngineEntry {
        Objects.requireNonNull(engineId, "engineId");
        Map<Integer, Map<Integer, String>> copy = new LinkedHashMap<>();
        Objects.requireNonNull(workerAddr, "workerAddr").forEach((tp, pps) ->
                copy.put(Objects.requireNonNull(tp, "tp_rank"),
                        Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(pps, "pp map")))));
        workerAddr = Collections.unmodifiableMap(copy);
    }

    /** vLLM's {@code _tp_size[engine_id]}: the number of registered TP ranks. */
    public int tpSize() {
        return workerAddr.size();
    }
}
