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
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py</a>
 */
public record RegisterWorkerPayload(String engineId, int dpRank, int tpRank, int ppRank, String addr) {

    public RegisterWorkerPayload {
        Objects.requireNonNull(engineId, "engineId");
        Objects.requireNonNull(addr, "addr");
    }

    /** The JSON object as pydantic's {@code model_dump()} orders it. */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("engine_id", engineId);
        m.put("dp_rank", (long) dpRank);
        m.put("tp_rank", (long) tpRank);
        m.put("pp_rank", (long) ppRank);
        m.put("addr", addr);
        return Json.write(m);
    }

    @Override
    public String toString() {
        // pydantic's repr-like form, used in log and error messages
        return "engine_id='" + engineId + "' dp_rank=" + dpRank + " tp_rank=" + tpRank + " pp_rank=" + ppRank
                + " addr='" + addr + "'";
    }
}
