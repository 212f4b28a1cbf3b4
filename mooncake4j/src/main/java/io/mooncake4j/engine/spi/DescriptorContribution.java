package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.List;
import java.util.Map;

/**
 * What a transport adds to the local segment descriptor when the core builds it (on every
 * metadata request, so it always reflects the current registrations). Typed calls set the fields
 * Mooncake's C++ engine reads; {@link #segmentExtension} and {@link #bufferExtension} set fields
 * it ignores, under the transport's own key ({@code "mc4j_<name>"}): values are JSON-able
 * (String, Long, Boolean, List, Map with String keys).
 */
public interface DescriptorContribution {

    /** {@code tcp_data_port} (the TCP transport). */
    void tcpDataPort(int port);

    /**
     * The RDMA fields: {@code devices}, {@code priority_matrix}; the descriptor's {@code protocol}
     * becomes {@code "rdma"} when a transport calls this.
     */
    void rdmaDevices(List<SegmentDescriptor.Device> devices, Map<String, List<List<String>>> priorityMatrix);

    /**
     * An RDMA buffer entry (named by location, per-device {@code rkey}/{@code lkey}) for the
     * registered buffer based at {@code owner}; a buffer split into several memory regions has one
     * entry per piece, in the order given. When a transport contributes RDMA devices, the
     * descriptor lists these entries (registration order) instead of TCP-shaped ones.
     */
    void rdmaBuffer(long owner, SegmentDescriptor.Buffer entry);

    /** A top-level extension field {@code key} (must start with {@code "mc4j_"}). */
    void segmentExtension(String key, Object value);

    /** An extension field {@code key} (must start with {@code "mc4j_"}) of the buffer based at {@code address}. */
    void bufferExtension(long address, String key, Object value);
}
