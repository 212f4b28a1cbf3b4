package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class StagingConfigTest {

    @Test
    void defaultsAreFourOneMebibyteBuffersAndEightShared() {
        assertEquals(new StagingConfig(1 << 20, 4, 8), StagingConfig.fromEnvironment(Map.of()));
    }

    @Test
    void environmentOverridesAndOutOfRangeValuesFallBack() {
        assertEquals(new StagingConfig(256 * 1024, 8, 2), StagingConfig.fromEnvironment(Map.of(
                "MOONCAKE4J_TCP_STAGING_BUFFER_KB", "256", "MOONCAKE4J_TCP_STAGING_DEPTH", "8",
                "MOONCAKE4J_TCP_STAGING_SHARED", "2")));
        assertEquals(new StagingConfig(1 << 20, 4, 8), StagingConfig.fromEnvironment(Map.of(
                "MOONCAKE4J_TCP_STAGING_BUFFER_KB", "1", "MOONCAKE4J_TCP_STAGING_DEPTH", "x",
                "MOONCAKE4J_TCP_STAGING_SHARED", "0")));
    }
}
