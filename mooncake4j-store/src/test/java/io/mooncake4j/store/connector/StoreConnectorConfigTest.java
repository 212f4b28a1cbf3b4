package io.mooncake4j.store.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.MooncakeConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The connector's config as vLLM users write it: kv_transfer_config, MOONCAKE_CONFIG_PATH, env, hash algo. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class StoreConnectorConfigTest {

    static final String KV = "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}";

    @TempDir
    Path dir;

    Map<String, String> env(String json) throws IOException {
        Path p = dir.resolve("mooncake-" + System.nanoTime() + ".json");
        Files.writeString(p, json);
        Map<String, String> env = new HashMap<>();
        env.put("MOONCAKE_CONFIG_PATH", p.toString());
        return env;
    }

    @Test
    void readsVllmsKeysWithTheirDefaults() throws IOException {
        Map<String, String> env = env("{\"metadata_server\":\"P2PHANDSHAKE\",\"master_server_address\":\"127.0.0.1:50051\","
                + "\"protocol\":\"tcp\",\"global_segment_size\":\"3.5GB\"}");
        env.put("PYTHONHASHSEED", "0");
        StoreConnectorConfig c = StoreConnectorConfig.from(KV, env, "/models/Qwen/Qwen3-0.6B/", null);
        assertEquals("127.0.0.1:50051", c.store().masterServerAddress());
        assertEquals((long) (3.5 * (1L << 30)), c.store().globalSegmentSize());
        assertEquals(StoreConnectorConfig.VLLM_DEFAULT_SIZE, c.store().localBufferSize(), "vLLM's 4 GiB default");
        assertEquals("Qwen3-0.6B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0", c.namespace().prefix());
        assertEquals(BlockHasher.Algorithm.SHA256, c.hasher().algorithm());
        assertEquals("0", c.hasher().seed());
        assertNull(c.preferredSegment());
        assertTrue(c.canLoad() && c.canSave());
    }

    @Test
    void extraConfigEnvironmentAndRole() throws IOException {
        Map<String, String> env = env("{\"master_server_address\":\"m:1\",\"global_segment_size\":1048576,"
                + "\"local_buffer_size\":\"1MB\"}");
        env.put("MOONCAKE_PREFERRED_SEGMENT", "host-b:12345");
        env.put("MOONCAKE_REQUESTER_LOCAL_HOSTNAME", "10.0.0.7");
        StoreConnectorConfig c = StoreConnectorConfig.from("{\"kv_connector\":\"MooncakeStoreConnector\","
                + "\"kv_role\":\"kv_consumer\",\"kv_connector_extra_config\":{\"cache_prefix\":\"fleet\"}}", env, "m", "sha256_cbor");
        assertEquals("host-b:12345", c.preferredSegment());
        assertEquals("10.0.0.7", c.store().localHostname());
        assertEquals("fleet@m@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0", c.namespace().prefix());
        assertEquals(BlockHasher.Algorithm.SHA256_CBOR, c.hasher().algorithm());
        assertFalse(c.canSave(), "a kv_consumer loads only");
        StoreConnectorConfig d = StoreConnectorConfig.from("{\"kv_connector\":\"MooncakeStoreConnector\","
                + "\"kv_connector_extra_config\":{\"preferred_segment\":\" host-c:1 \"}}", env, "m", null);
        assertEquals("host-c:1", d.preferredSegment(), "the extra config wins over the environment");
        assertEquals("kv_both", d.role());
    }

    @Test
    void badConfigsAreRefusedNamingTheKey() throws IOException {
        Map<String, String> ok = env("{\"master_server_address\":\"m:1\",\"global_segment_size\":\"1MB\"}");
        assertEquals("mode", assertThrows(MooncakeConfigException.class, () -> StoreConnectorConfig.from(KV,
                env("{\"master_server_address\":\"m:1\",\"mode\":\"cluster\"}"), "m", null)).key());
        assertEquals("global_segment_size", assertThrows(MooncakeConfigException.class, () -> StoreConnectorConfig.from(KV,
                env("{\"master_server_address\":\"m:1\",\"global_segment_size\":0}"), "m", null)).key(),
                "embedded mode needs a segment");
        assertEquals("global_segment_size", assertThrows(MooncakeConfigException.class, () -> StoreConnectorConfig.from(KV,
                env("{\"master_server_address\":\"m:1\",\"mode\":\"standalone-store\"}"), "m", null)).key(),
                "standalone-store must contribute 0 (the 4 GiB default is not 0)");
        StoreConnectorConfig standalone = StoreConnectorConfig.from(KV, env("{\"master_server_address\":\"m:1\","
                + "\"mode\":\"standalone-store\",\"global_segment_size\":0,\"local_buffer_size\":\"16MB\"}"), "m", null);
        assertEquals(0, standalone.store().globalSegmentSize());
        assertEquals("MOONCAKE_CONFIG_PATH", assertThrows(MooncakeConfigException.class,
                () -> StoreConnectorConfig.from(KV, Map.of(), "m", null)).key());
        assertEquals("kv_connector", assertThrows(MooncakeConfigException.class,
                () -> StoreConnectorConfig.from("{\"kv_connector\":\"MooncakeConnector\"}", ok, "m", null)).key());
        assertEquals("kv_role", assertThrows(MooncakeConfigException.class, () -> StoreConnectorConfig.from(
                "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_boss\"}", ok, "m", null)).key());
        assertEquals("preferred_segment", assertThrows(MooncakeConfigException.class, () -> StoreConnectorConfig.from(
                "{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_connector_extra_config\":{\"preferred_segment\":\"\"}}",
                ok, "m", null)).key());
        assertEquals("prefix_caching_hash_algo", assertThrows(MooncakeConfigException.class,
                () -> StoreConnectorConfig.from(KV, ok, "m", "xxhash")).key());
        assertTrue(StoreConnectorConfig.names(KV));
        assertFalse(StoreConnectorConfig.names("{\"kv_connector\":\"MooncakeConnector\"}"));
        assertFalse(StoreConnectorConfig.names("not json"));
    }
}
