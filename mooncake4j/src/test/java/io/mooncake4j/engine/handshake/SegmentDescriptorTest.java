package io.mooncake4j.engine.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Descriptor JSON: the spec's worked examples byte for byte (§2.6) and the validation rules. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class SegmentDescriptorTest {

    static final String TCP = "{\"buffers\":[{\"addr\":140234567892992,\"length\":1073741824,"
            + "\"name\":\"10.0.0.2:15321\"}],\"name\":\"10.0.0.2:15321\",\"protocol\":\"tcp\",\"tcp_data_port\":16011,"
            + "\"tcp_proto_version\":2,\"timestamp\":\"2026-08-22 10:15:30.123456\"}\n";

    static final String RDMA = "{\"buffers\":[{\"addr\":140234567892992,\"length\":1073741824,\"lkey\":[2101],"
            + "\"name\":\"cpu:0\",\"rkey\":[2101]}],\"devices\":[{\"gid\":\"00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02\","
            + "\"lid\":0,\"name\":\"mlx5_0\"}],\"name\":\"10.0.0.2:15321\",\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[]]},"
            + "\"protocol\":\"rdma\",\"tcp_data_port\":0,\"tcp_proto_version\":1,\"timestamp\":\"t\"}\n";

    @Test
    void tcpExampleRoundTripsByteForByte() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.parse(TCP);
        assertEquals("10.0.0.2:15321", d.name());
        assertEquals(16011, d.tcpDataPort());
        assertEquals(2, d.tcpProtoVersion());
        assertEquals("10.0.0.2", d.host());
        assertEquals(List.of(SegmentDescriptor.Buffer.tcp("10.0.0.2:15321", 140234567892992L, 1L << 30)), d.buffers());
        assertEquals(TCP, d.toJson());
    }

    @Test
    void rdmaExampleRoundTripsByteForByte() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.parse(RDMA);
        assertEquals(List.of(2101L), d.buffers().get(0).rkey());
        assertEquals("mlx5_0", d.devices().get(0).name());
        assertEquals(List.of(List.of("mlx5_0"), List.of()), d.priorityMatrix().get("cpu:0"));
        assertEquals(RDMA, d.toJson());
    }

    @Test
    void builtTcpDescriptorIsSortedCompactWithTrailingNewline() {
        SegmentDescriptor d = new SegmentDescriptor("h:1", "tcp", 2, 2, "ts", null,
                List.of(SegmentDescriptor.Buffer.tcp("h:1", 4096, 8192)), null, null);
        assertEquals("{\"buffers\":[{\"addr\":4096,\"length\":8192,\"name\":\"h:1\"}],\"name\":\"h:1\","
                + "\"protocol\":\"tcp\",\"tcp_data_port\":2,\"tcp_proto_version\":2,\"timestamp\":\"ts\"}\n", d.toJson());
    }

    @Test
    void missingOptionalKeysTakeMooncakeDefaultsAndUnknownKeysAreIgnored() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.parse("{\"name\":\"a:1\",\"protocol\":\"tcp\",\"extra\":[1],"
                + "\"buffers\":[]}");
        assertEquals(0, d.tcpDataPort());
        assertEquals(1, d.tcpProtoVersion());
        assertNull(d.rdmaServerName());
    }

    @Test
    void addressesAboveTwoToThe63RoundTripUnsigned() throws Exception {
        String json = "{\"buffers\":[{\"addr\":18446744073709547520,\"length\":4096,\"name\":\"a:1\"}],\"name\":\"a:1\","
                + "\"protocol\":\"tcp\",\"tcp_data_port\":1,\"tcp_proto_version\":2,\"timestamp\":\"\"}\n";
        SegmentDescriptor d = SegmentDescriptor.parse(json);
        assertEquals(-4096L, d.buffers().get(0).addr());
        assertEquals(json, d.toJson());
    }

    @Test
    void descriptorsMooncakeRejectsAreRejected() {
        String[] bad = {
            "{\"name\":\"a:1\",\"protocol\":\"tcp\",\"buffers\":[{\"addr\":1,\"length\":1,\"name\":\"\"}]}",
            "{\"name\":\"a:1\",\"protocol\":\"tcp\",\"buffers\":[{\"addr\":0,\"length\":1,\"name\":\"x\"}]}",
            "{\"name\":\"a:1\",\"protocol\":\"tcp\",\"buffers\":[{\"addr\":1,\"length\":0,\"name\":\"x\"}]}",
            "{\"name\":\"a:1\",\"protocol\":\"carrier-pigeon\",\"buffers\":[]}",
            "{\"name\":\"a:1\",\"protocol\":\"rdma\",\"devices\":[{\"gid\":\"\",\"lid\":0,\"name\":\"m\"}],\"buffers\":[]}",
            "{\"name\":\"a:1\",\"protocol\":\"rdma\",\"devices\":[{\"gid\":\"g\",\"lid\":0,\"name\":\"m\"}],"
                    + "\"buffers\":[{\"addr\":1,\"length\":1,\"name\":\"cpu:0\",\"rkey\":[1,2],\"lkey\":[1,2]}]}",
            "{\"name\":\"a:1\",\"protocol\":\"rdma\",\"devices\":[{\"gid\":\"g\",\"lid\":0,\"name\":\"m\"}],"
                    + "\"buffers\":[{\"addr\":1,\"length\":1,\"name\":\"cpu:0\",\"rkey\":[1],\"lkey\":[]}]}",
            "{\"name\":\"a:1\",\"protocol\":\"tcp\",\"buffers\":[{\"addr\":-5,\"length\":1,\"name\":\"x\"}]}",
            "{\"name\":\"a:1\",\"protocol\":\"tcp\",\"tcp_data_port\":\"80\",\"buffers\":[]}",
            "null",
            "{\"name\":",
        };
        for (String b : bad) {
            assertThrows(SegmentDescriptor.InvalidDescriptorException.class, () -> SegmentDescriptor.parse(b), b);
        }
    }

    @Test
    void rdmaBufferWithoutKeysIsAccepted() throws Exception {
        SegmentDescriptor d = SegmentDescriptor.parse("{\"name\":\"a:1\",\"protocol\":\"rdma\",\"devices\":"
                + "[{\"gid\":\"g\",\"lid\":0,\"name\":\"m\"}],\"buffers\":[{\"addr\":1,\"length\":1,\"name\":\"cpu:0\","
                + "\"rkey\":[],\"lkey\":[]}]}");
        assertEquals(List.of(), d.buffers().get(0).rkey());
    }
}
