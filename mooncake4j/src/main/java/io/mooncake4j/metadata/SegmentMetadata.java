package io.mooncake4j.metadata;

import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.Optional;

/**
 * Segments in a {@link MetadataStore}, as Mooncake's C++ engine keeps them: {@link #publish} writes
 * a segment's descriptor ({@code ram/<segment>}) and its engine's address ({@code rpc_meta/<name>}),
 * {@link #withdraw} removes both, {@link #lookup} reads a peer's. The JSON is the C++ engine's, so
 * C++ engines find segments published here and this class reads theirs. Thread-safe.
 *
 * @param store where the entries live
 * @param keys  the key scheme (cluster id)
 */
public record SegmentMetadata(MetadataStore store, MetadataKeys keys) {

    /**
     * A peer's entries: the descriptor and where its engine listens.
     *
     * @param descriptor the segment descriptor
     * @param rpc        the engine's address ({@code rpc_meta} of the descriptor's name)
     */
    public record Peer(SegmentDescriptor descriptor, RpcMeta rpc) {

        /** {@return {@code host:port} of the peer's TCP data port, where a C++ TCP transport connects} */
        public String tcpDataAddress() {
            return PeerAddress.format(rpc.ipOrHostName(), descriptor.tcpDataPort());
        }
    }

    /**
     * Publishes a segment: its descriptor under {@code segmentName} (and under the descriptor's own
     * name when that differs, which is the name C++ peers resolve) and the engine's address under
     * the descriptor's name (and {@code segmentName}). The master's HTTP store accepts a repeated
     * {@code rpc_meta} only with the same body, which a re-publish of one engine sends.
     *
     * @param segmentName the name the segment is known by (a store segment's name)
     * @param descriptor  the engine's descriptor
     * @param rpc         where the engine listens
     */
    public void publish(String segmentName, SegmentDescriptor descriptor, RpcMeta rpc) {
        String json = descriptor.toJson();
        store.put(keys.segment(segmentName), json);
        store.put(keys.rpcMeta(descriptor.name()), rpc.toJson());
        if (!segmentName.equals(descriptor.name())) {
            store.put(keys.segment(descriptor.name()), json);
            store.put(keys.rpcMeta(segmentName), rpc.toJson());
        }
    }

    /**
     * Removes what {@link #publish} wrote (entries already gone, e.g. cleaned up by the master after
     * a client expiry, are not an error).
     */
    public void withdraw(String segmentName, String descriptorName) {
        store.delete(keys.segment(segmentName));
        store.delete(keys.rpcMeta(descriptorName));
        if (!segmentName.equals(descriptorName)) {
            store.delete(keys.segment(descriptorName));
            store.delete(keys.rpcMeta(segmentName));
        }
    }

    /**
     * @param segmentName a peer's segment name
     * @return its descriptor and address, or empty when no descriptor is published under the name
     * @throws MetadataException when the store fails, a value is malformed, or the descriptor has no
     *         {@code rpc_meta} entry
     */
    public Optional<Peer> lookup(String segmentName) {
        Optional<String> json = store.get(keys.segment(segmentName));
        if (json.isEmpty()) {
            return Optional.empty();
        }
        SegmentDescriptor d;
        try {
            d = SegmentDescriptor.parse(json.get());
        } catch (SegmentDescriptor.InvalidDescriptorException e) {
            throw new MetadataException("descriptor of segment " + segmentName + " is not valid: " + e.getMessage(), e);
        }
        String rpc = store.get(keys.rpcMeta(d.name())).orElseThrow(() -> new MetadataException(
                "segment " + segmentName + " has a descriptor but no " + keys.rpcMeta(d.name()) + " entry", null));
        return Optional.of(new Peer(d, RpcMeta.parse(rpc)));
    }
}
