package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code --kv-transfer-config} split into the P/D connector's and the store connector's parts. */
class KvConnectorsTest {

    @Test
    void aloneOrCombinedAsVllmWritesThem() {
        KvConnectors.Split p2p = KvConnectors.split("{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_producer\"}");
        assertNull(p2p.store());
        KvConnectors.Split store = KvConnectors.split(
                "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_consumer\"}");
        assertEquals(Map.of("kv_connector", "MooncakeConnector", "kv_role", "kv_consumer"), Json.parseObject(store.p2p()));
        assertTrue(store.store().contains("MooncakeStoreConnector"));
        KvConnectors.Split multi = KvConnectors.split("{\"kv_connector\":\"MultiConnector\",\"kv_role\":\"kv_producer\","
                + "\"engine_id\":\"p0\",\"kv_connector_extra_config\":{\"connectors\":["
                + "{\"kv_connector\":\"MooncakeConnector\",\"kv_connector_extra_config\":{\"num_workers\":4}},"
                + "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}]}}");
        Map<String, Object> p = Json.parseObject(multi.p2p());
        assertEquals("p0", p.get("engine_id"));
        assertEquals("kv_producer", p.get("kv_role"), "inherited from the MultiConnector");
        assertEquals(Map.of("num_workers", 4L), p.get("kv_connector_extra_config"));
        Map<String, Object> s = Json.parseObject(multi.store());
        assertEquals("kv_both", s.get("kv_role"), "the child's own role");
    }

    @Test
    void unsupportedCombinationsAreRefused() {
        for (String bad : List.of(
                "{\"kv_connector\":\"MultiConnector\"}",
                "{\"kv_connector\":\"MultiConnector\",\"kv_connector_extra_config\":{\"connectors\":[]}}",
                "{\"kv_connector\":\"MultiConnector\",\"kv_connector_extra_config\":{\"connectors\":["
                        + "{\"kv_connector\":\"MooncakeStoreConnector\"},{\"kv_connector\":\"MooncakeConnector\"}]}}",
                "{\"kv_connector\":\"MultiConnector\",\"kv_connector_extra_config\":{\"connectors\":["
                        + "{\"kv_connector\":\"NixlConnector\"}]}}",
                "{\"kv_connector\":\"MultiConnector\",\"kv_connector_extra_config\":{\"connectors\":[1]}}")) {
            assertThrows(Flags.UsageException.class, () -> KvConnectors.split(bad), bad);
        }
    }
}
