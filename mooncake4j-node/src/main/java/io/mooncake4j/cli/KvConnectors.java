package io.mooncake4j.cli;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.store.connector.StoreConnectorConfig;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Splits {@code serve --kv-transfer-config} into the engine's P/D connector config and the store
 * connector's, as vLLM reads them: {@code MooncakeConnector} alone, {@code MooncakeStoreConnector} alone
 * (the P/D connector then stays idle), or vLLM's {@code MultiConnector} of the two
 * ({@code kv_connector_extra_config.connectors}: the P/D connector first, so that KV sent by a P node
 * wins over the pool, as {@code MultiConnector} loads from the first connector with a hit; each child
 * inherits the parent's {@code engine_id} and {@code kv_role} when it has none).
 */
final class KvConnectors {

    private KvConnectors() {}

    /**
     * @param p2p   the P/D connector's kv_transfer_config JSON
     * @param store the store connector's, or null
     */
    record Split(String p2p, String store) {}

    @SuppressWarnings("unchecked")
    static Split split(String json) {
        Map<String, Object> root;
        try {
            root = Json.parseObject(json);
        } catch (RuntimeException e) {
            return new Split(json, null); // the P/D config parser reports the error
        }
        Object name = root.get("kv_connector");
        Object role = root.getOrDefault("kv_role", "kv_both");
        if (StoreConnectorConfig.CONNECTOR.equals(name)) {
            return new Split(Json.write(Map.of("kv_connector", "MooncakeConnector", "kv_role", role)), json);
        }
        if (!"MultiConnector".equals(name)) {
            return new Split(json, null);
        }
        Object extra = root.get("kv_connector_extra_config");
        Object list = extra instanceof Map<?, ?> m ? m.get("connectors") : null;
        if (!(list instanceof List<?> children) || children.isEmpty()) {
            throw new Flags.UsageException("--kv-transfer-config: a MultiConnector needs kv_connector_extra_config.connectors");
        }
        String p2p = null;
        String store = null;
        for (Object c : children) {
            if (!(c instanceof Map<?, ?> child)) {
                throw new Flags.UsageException("--kv-transfer-config: each MultiConnector child must be an object");
            }
            Map<String, Object> merged = new LinkedHashMap<>((Map<String, Object>) child);
            if (root.containsKey("engine_id")) {
                merged.putIfAbsent("engine_id", root.get("engine_id"));
            }
            merged.putIfAbsent("kv_role", role);
            Object childName = merged.get("kv_connector");
            if ("MooncakeConnector".equals(childName) && p2p == null) {
                p2p = Json.write(merged);
            } else if (StoreConnectorConfig.CONNECTOR.equals(childName) && store == null) {
                if (p2p == null) {
                    throw new Flags.UsageException("--kv-transfer-config: this node runs a MultiConnector with "
                            + "MooncakeConnector first and MooncakeStoreConnector second");
                }
                store = Json.write(merged);
            } else {
                throw new Flags.UsageException("--kv-transfer-config: MultiConnector child " + Json.write(childName)
                        + " is not supported (MooncakeConnector, then MooncakeStoreConnector)");
            }
        }
        if (p2p == null) {
            throw new Flags.UsageException("--kv-transfer-config: a MultiConnector here needs a MooncakeConnector child");
        }
        return new Split(p2p, store);
    }
}
