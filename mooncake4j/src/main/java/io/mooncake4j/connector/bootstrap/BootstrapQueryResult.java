package io.mooncake4j.connector.bootstrap;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The answer of {@code GET /query}: dp_rank → {@link EngineEntry} (engine id and tp_rank →
 * pp_rank → address), in the server's order.
 *
 * @param engines the entries by data-parallel rank
 */
public record BootstrapQueryResult(Map<Integer, EngineEntry> engines) {

    public BootstrapQueryResult {
        engines = Collections.unmodifiableMap(new LinkedHashMap<>(Objects.requireNonNull(engines, "engines")));
    }

    /**
     * The entry of an engine id, as vLLM's D stores it in {@code _remote_agents[engine_id]}: when
     * several DP ranks carry the same engine id, the last one wins (vLLM iterates and overwrites).
     */
    public Optional<EngineEntry> engine(String engineId) {
        EngineEntry found = null;
        for (EngineEntry e : engines.values()) {
            if (e.engineId().equals(engineId)) {
                found = e;
            }
        }
        return Optional.ofNullable(found);
    }

    /**
     * vLLM's D-side {@code _remote_agents} built from this answer: engine id → tp_rank → pp_rank →
     * address (last DP entry wins for a repeated engine id), in the server's order.
     */
    public Map<String, Map<Integer, Map<Integer, String>>> byEngineId() {
        Map<String, Map<Integer, Map<Integer, String>>> out = new LinkedHashMap<>();
        for (EngineEntry e : engines.values()) {
            out.put(e.engineId(), e.workerAddr());
        }
        return Collections.unmodifiableMap(out);
    }
}
