package io.mooncake4j.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.MooncakeConfigException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MooncakeConnectorConfigTest {

    @Test
    void parsesVllmKvTransferConfigAndEnvironment() {
        String json = """
                {"kv_connector":"MooncakeConnector","kv_role":"kv_producer","engine_id":"p-0",
                 "kv_connector_extra_config":{"mooncake_protocol":"tcp","num_workers":4,"device_name":"mlx5_0",
                 "unknown":1}}""";
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(json,
                Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "9000", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT", "5")).build();
        assertEquals(KvRole.KV_PRODUCER, c.kvRole());
        assertEquals("tcp", c.protocol());
        assertEquals(4, c.numWorkers());
        assertEquals(8, c.numSenderTasks());
        assertEquals("mlx5_0", c.deviceName());
        assertEquals(9000, c.bootstrapPort());
        assertEquals(Duration.ofSeconds(5), c.abortRequestTimeout());
        assertTrue(c.isProducer());
    }

    @Test
    void defaultsFollowVllm() {
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"kv_consumer\",\"engine_id\":\"d\"}", Map.of()).build();
        assertEquals("rdma", c.protocol());
        assertEquals(10, c.numWorkers());
        assertEquals("", c.deviceName());
        assertEquals(8998, c.bootstrapPort());
        assertEquals(Duration.ofSeconds(480), c.abortRequestTimeout());
    }

    @Test
    void invalidValuesNameTheKey() {
        MooncakeConfigException e = assertThrows(MooncakeConfigException.class,
                () -> MooncakeConnectorConfig.fromKvTransferConfigJson(
                        "{\"kv_role\":\"kv_producer\",\"engine_id\":\"p\",\"kv_connector_extra_config\":{\"num_workers\":\"4\"}}",
                        Map.of()).build());
        assertEquals("kv_connector_extra_config.num_workers", e.key());
        assertTrue(e.getMessage().contains("num_workers"));
        e = assertThrows(MooncakeConfigException.class, () -> MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"producer\",\"engine_id\":\"p\"}", Map.of()));
        assertEquals("kv_role", e.key());
        e = assertThrows(MooncakeConfigException.class, () -> MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"kv_both\",\"engine_id\":\"p\"}", Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "x")));
        assertEquals("VLLM_MOONCAKE_BOOTSTRAP_PORT", e.key());
        e = assertThrows(MooncakeConfigException.class, () -> MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"kv_both\",\"engine_id\":\" \"}", Map.of()).build());
        assertEquals("engine_id", e.key());
    }

    @Test
    void transferThreadNiceIsAnIntegerIn0To19DefaultingTo0() {
        assertEquals(0, MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"kv_producer\",\"engine_id\":\"p\"}", Map.of()).build().transferThreadNice());
        MooncakeConnectorConfig c = MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":\"kv_producer\","
                + "\"engine_id\":\"p\",\"kv_connector_extra_config\":{\"transfer_thread_nice\":10}}", Map.of()).build();
        assertEquals(10, c.transferThreadNice());
        assertEquals(10, c.toBuilder().build().transferThreadNice());
        for (String bad : new String[] {"20", "-1", "\"5\"", "1.5"}) {
            MooncakeConfigException e = assertThrows(MooncakeConfigException.class,
                    () -> MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":\"kv_producer\",\"engine_id\""
                            + ":\"p\",\"kv_connector_extra_config\":{\"transfer_thread_nice\":" + bad + "}}", Map.of())
                            .build(), bad);
            assertEquals("kv_connector_extra_config.transfer_thread_nice", e.key());
        }
        MooncakeConfigException e = assertThrows(MooncakeConfigException.class, () -> MooncakeConnectorConfig.builder()
                .kvRole(KvRole.KV_PRODUCER).engineId("p").transferThreadNice(20).build());
        assertEquals("kv_connector_extra_config.transfer_thread_nice", e.key());
    }

    @Test
    void sideChannelZmqAcceptsOnlyBuiltinAndJeromqFailsClearly() {
        MooncakeConnectorConfig absent = MooncakeConnectorConfig.fromKvTransferConfigJson(
                "{\"kv_role\":\"kv_producer\",\"engine_id\":\"p\"}", Map.of()).build();
        MooncakeConnectorConfig builtin = MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":"
                + "\"kv_producer\",\"engine_id\":\"p\",\"kv_connector_extra_config\":{\"side_channel_zmq\":\""
                + MooncakeConnectorConfig.SIDE_CHANNEL_BUILTIN + "\"}}", Map.of()).build();
        assertEquals(absent, builtin, "\"builtin\" is the side channel there is: the same config as without the key");
        for (String bad : new String[] {"\"jeromq\"", "\"libzmq\"", "\"JeroMQ\"", "true", "1", "\"\""}) {
            MooncakeConfigException e = assertThrows(MooncakeConfigException.class,
                    () -> MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":\"kv_producer\",\"engine_id\""
                            + ":\"p\",\"kv_connector_extra_config\":{\"side_channel_zmq\":" + bad + "}}", Map.of())
                            .build(), bad);
            assertEquals("kv_connector_extra_config.side_channel_zmq", e.key());
            assertTrue(e.getMessage().contains("kv_connector_extra_config.side_channel_zmq must be \"builtin\""),
                    e.getMessage());
            assertTrue(e.getMessage().contains("got " + bad), e.getMessage());
        }
    }

    @Test
    void missingEngineIdBecomesAFreshUuid4AsInVllm() {
        String a = MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":\"kv_both\"}", Map.of()).build()
                .engineId();
        String b = MooncakeConnectorConfig.fromKvTransferConfigJson("{\"kv_role\":\"kv_both\"}", Map.of()).build()
                .engineId();
        assertEquals(4, java.util.UUID.fromString(a).version());
        assertEquals(a, java.util.UUID.fromString(a).toString());
        assertNotEquals(a, b);
    }
}
