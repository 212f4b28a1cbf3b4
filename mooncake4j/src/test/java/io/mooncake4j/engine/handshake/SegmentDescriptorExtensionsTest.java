package io.mooncake4j.engine.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The {@code mc4j_*} extension fields transports add: kept, written, ignored by C++-shaped descriptors. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class SegmentDescriptorExtensionsTest {

    @Test
    void cppDescriptorHasNoExtensionsAndRoundTripsUnchanged() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.parse(SegmentDescriptorTest.TCP);
        assertTrue(d.extensions().isEmpty());
        assertTrue(d.buffers().get(0).extensions().isEmpty());
        assertEquals(SegmentDescriptorTest.TCP, d.toJson());
    }

    @Test
    void extensionsRoundTripAtTopLevelAndPerBuffer() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.tcp("127.0.0.1:1", 2,
                List.of(SegmentDescriptor.Buffer.tcp("127.0.0.1:1", 4096, 8192)
                        .withExtension("mc4j_shm", Map.of("name", "/mc4j-1-0", "offset", 0L))))
                .withExtension("mc4j_machine", "m-1");
        String json = d.toJson();
        assertTrue(json.contains("\"mc4j_machine\":\"m-1\""), json);
        SegmentDescriptor back = SegmentDescriptor.parse(json);
        assertEquals("m-1", back.extensions().get("mc4j_machine"));
        assertEquals(Map.of("name", "/mc4j-1-0", "offset", 0L), back.buffers().get(0).extensions().get("mc4j_shm"));
        assertEquals(json, back.toJson());
    }

    @Test
    void unknownKeysWithoutThePrefixAreDropped() throws Exception {
        String json = SegmentDescriptorTest.TCP.replace("\"protocol\"", "\"other\":1,\"mc4j_x\":true,\"protocol\"");
        SegmentDescriptor d = SegmentDescriptor.parse(json);
        assertEquals(Map.of("mc4j_x", true), d.extensions());
        assertFalse(d.toJson().contains("other"));
    }

    @Test
    void extensionKeysMustCarryThePrefix() {
        SegmentDescriptor d = SegmentDescriptor.tcp("127.0.0.1:1", 2, List.of());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> d.withExtension("shm", 1L));
        assertTrue(e.getMessage().contains("mc4j_"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> d.withExtension("mc4j_", 1L));
    }
}
