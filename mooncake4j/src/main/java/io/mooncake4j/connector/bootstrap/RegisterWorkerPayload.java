package io.mooncake4j.connector.bootstrap;

import io.mooncake4j.internal.json.Json;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's {@code RegisterWorkerPayload}: the JSON body of {@code POST /register}, one per P worker.
 *
 * @param engineId the P engine's id
 * @param dpRank   data-parallel rank of the engine
 * @param tpRank   tensor-parallel rank of the worker
 * @param ppRank   pipeline-parallel rank of the worker
 * @param addr     the worker's side-channel address, {@code "tcp://<ip>:<port>"}
 * @param kvLayout what the worker's KV blocks mean (model, dtype, shapes, tokenizer, block size), or null:
 *                 sent as {@value #KV_LAYOUT_KEY}, a key vLLM's server ignores (pydantic drops unknown
 *                 fields) and ours returns in the engine's {@code /query} entry, so that a decode node
 *                 can refuse a prefill node of another model before any KV moves
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py</a>
 */
public record RegisterWorkerPayload(String engineId, int dpRank, int tpRank, int ppRank, String addr,
        String kvLayout) {

    /** The JSON key of {@link #kvLayout()} in {@code /register} bodies and {@code /query} entries. */
    public static final String KV_LAYOUT_KEY = "mooncake4j_kv_layout";

    /** vLLM's payload, without a KV layout. */
    public RegisterWorkerPayload(String engineId, int dpRank, int tpRank, int ppRank, String addr) {
        this(engineId, dpRank, tpRank, ppRank, addr, null);
    }

    public RegisterWorkerPayload {
        Objects.requireNonNull(engineId, "engineId");
        Objects.requireNonNull(addr, "addr");
    }

    /** The JSON object as pydantic's {@code model_dump()} orders it (then the KV layout, when there is one). */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("engine_id", engineId);
        m.put("dp_rank", (long) dpRank);
        m.put("tp_rank", (long) tpRank);
        m.put("pp_rank", (long) ppRank);
        m.put("addr", addr);
        if (kvLayout != null) {
            m.put(KV_LAYOUT_KEY, kvLayout);
        }
        return Json.write(m);
    }

    @Override
    public String toString() {
        // pydantic's repr-like form, used in log and error messages
        return "engine_id='" + engineId + "' dp_rank=" + dpRank + " tp_rank=" + tpRank + " pp_rank=" + ppRank
                + " addr='" + addr + "'";
    }
}
