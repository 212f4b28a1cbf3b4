package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A TCP-shaped segment descriptor carrying one transport's extension fields, for a transport that
 * is driven without the engine core (the shm transport's tests). The
 * transport's typed RDMA/TCP contributions are ignored: only its {@code mc4j_*} fields are kept.
 */
public final class ExtensionDescriptors {

    private ExtensionDescriptors() {}

    /** {@code name}'s descriptor with {@code buffers} ({@code {address, length}} pairs) and {@code t}'s extensions. */
    public static SegmentDescriptor describe(String name, int tcpDataPort, List<long[]> buffers, Transport t) {
        Map<String, Object> top = new LinkedHashMap<>();
        Map<Long, Map<String, Object>> perBuffer = new LinkedHashMap<>();
        t.describe(new DescriptorContribution() {
            @Override
            public void tcpDataPort(int port) {}

            @Override
            public void rdmaDevices(List<SegmentDescriptor.Device> d, Map<String, List<List<String>>> m) {}

            @Override
            public void rdmaBuffer(long owner, SegmentDescriptor.Buffer entry) {}

            @Override
            public void segmentExtension(String key, Object value) {
                top.put(key, value);
            }

            @Override
            public void bufferExtension(long address, String key, Object value) {
                perBuffer.computeIfAbsent(address, a -> new LinkedHashMap<>()).put(key, value);
            }
        });
        List<SegmentDescriptor.Buffer> out = new ArrayList<>(buffers.size());
        for (long[] b : buffers) {
            SegmentDescriptor.Buffer e = SegmentDescriptor.Buffer.tcp(name, b[0], b[1]);
            for (var x : perBuffer.getOrDefault(b[0], Map.of()).entrySet()) {
                e = e.withExtension(x.getKey(), x.getValue());
            }
            out.add(e);
        }
        SegmentDescriptor d = SegmentDescriptor.tcp(name, tcpDataPort, out);
        for (var x : top.entrySet()) {
            d = d.withExtension(x.getKey(), x.getValue());
        }
        return d;
    }
}
