package io.mooncake4j.engine.core;

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.DescriptorContribution;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Builds the local segment descriptor from the registry and the transports' contributions. */
final class Descriptors {

    private Descriptors() {}

    /**
     * Collects contributions, then {@link #build}s Mooncake's shape: a TCP descriptor (buffers named
     * after the segment, protocol version 2) unless a transport contributed RDMA devices, then an
     * RDMA one (buffers named by location with their keys, {@code tcp_data_port} kept when tcp is
     * installed too). {@code mc4j_*} fields are added as given. Not thread-safe; one per request.
     */
    static final class Builder implements DescriptorContribution {
        private final String name;
        private final List<BufferRegistry.Buffer> buffers;
        private int tcpPort;
        private List<SegmentDescriptor.Device> devices;
        private Map<String, List<List<String>>> matrix;
        private final List<long[]> rdmaOwners = new ArrayList<>();
        private final List<SegmentDescriptor.Buffer> rdmaEntries = new ArrayList<>();
        private final Map<String, Object> top = new LinkedHashMap<>();
        private final Map<Long, Map<String, Object>> perBuffer = new HashMap<>();

        Builder(String name, List<BufferRegistry.Buffer> buffers) {
            this.name = name;
            this.buffers = buffers;
        }

        @Override
        public void tcpDataPort(int port) {
            tcpPort = port;
        }

        @Override
        public void rdmaDevices(List<SegmentDescriptor.Device> d, Map<String, List<List<String>>> m) {
            devices = d;
            matrix = m;
        }

        @Override
        public void rdmaBuffer(long owner, SegmentDescriptor.Buffer entry) {
            rdmaOwners.add(new long[] {owner});
            rdmaEntries.add(entry);
        }

        @Override
        public void segmentExtension(String key, Object value) {
            top.put(key, value);
        }

        @Override
        public void bufferExtension(long address, String key, Object value) {
            perBuffer.computeIfAbsent(address, a -> new LinkedHashMap<>()).put(key, value);
        }

        SegmentDescriptor build() {
            boolean rdma = devices != null;
            List<SegmentDescriptor.Buffer> out = new ArrayList<>(buffers.size());
            if (rdma) {
                for (int i = 0; i < rdmaEntries.size(); i++) {
                    SegmentDescriptor.Buffer e = rdmaEntries.get(i);
                    if (e.addr() == rdmaOwners.get(i)[0]) { // extensions describe a buffer from its base
                        e = withExtensions(e, e.addr());
                    }
                    out.add(e);
                }
            } else {
                for (BufferRegistry.Buffer b : buffers) {
                    out.add(withExtensions(SegmentDescriptor.Buffer.tcp(name, b.address(), b.length()), b.address()));
                }
            }
            SegmentDescriptor d = rdma
                    ? new SegmentDescriptor(name, "rdma", tcpPort, tcpPort > 0 ? 2 : 1, SegmentDescriptor.now(), null,
                            out, devices, matrix)
                    : SegmentDescriptor.tcp(name, tcpPort, out);
            for (var x : top.entrySet()) {
                d = d.withExtension(x.getKey(), x.getValue());
            }
            return d;
        }

        private SegmentDescriptor.Buffer withExtensions(SegmentDescriptor.Buffer e, long base) {
            for (var x : perBuffer.getOrDefault(base, Map.of()).entrySet()) {
                e = e.withExtension(x.getKey(), x.getValue());
            }
            return e;
        }
    }
}
