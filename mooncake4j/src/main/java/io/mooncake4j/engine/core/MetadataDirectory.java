package io.mooncake4j.engine.core;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.metadata.HttpMetadataStore;
import io.mooncake4j.metadata.MetadataException;
import io.mooncake4j.metadata.MetadataKeys;
import io.mooncake4j.metadata.RpcMeta;
import io.mooncake4j.metadata.SegmentMetadata;
import java.util.Map;
import java.util.Optional;

/**
 * The engine's side of Mooncake's HTTP metadata mode ({@code metadata_server =
 * http://host:port/metadata}): the engine publishes its own descriptor and {@code rpc_meta} there
 * (again whenever its registrations change, as the C++ engine updates its segment descriptor on
 * register and unregister), withdraws them on close, and {@code openSegment} reads a peer's
 * descriptor from there instead of asking the peer over the handshake. Thread-safe: the store is.
 */
final class MetadataDirectory implements AutoCloseable {

    private final SegmentMetadata metadata;

    private MetadataDirectory(SegmentMetadata metadata) {
        this.metadata = metadata;
    }

    /**
     * @param url the metadata server URL
     * @param env the environment ({@code MC_METADATA_CLUSTER_ID})
     * @throws IllegalArgumentException when {@code url} is not usable
     */
    static MetadataDirectory open(String url, Map<String, String> env) {
        return new MetadataDirectory(new SegmentMetadata(HttpMetadataStore.of(url), MetadataKeys.fromEnvironment(env)));
    }

    /** The store and key scheme (tests). */
    SegmentMetadata metadata() {
        return metadata;
    }

    /**
     * Publishes this engine's descriptor under its own name, with its RPC address.
     *
     * @throws MetadataException when the store refuses or cannot be reached
     */
    void publish(SegmentDescriptor local, String host, int rpcPort) {
        metadata.publish(local.name(), local, new RpcMeta(host, rpcPort));
    }

    /**
     * Removes what {@link #publish} wrote.
     *
     * @throws MetadataException when the store cannot be reached
     */
    void withdraw(String segmentName) {
        metadata.withdraw(segmentName, segmentName);
    }

    /**
     * A peer's descriptor as published. When its {@code rpc_meta} names another address than the
     * descriptor's name, the name is replaced by that address, since the handshake and the TCP data
     * connection go to the host the name carries, and {@code rpc_meta} is where the peer listens.
     *
     * @throws HandshakeException ({@link ErrorCodes#METADATA}) when the name is not published or
     *                            the store fails
     */
    SegmentDescriptor lookup(String name) throws HandshakeException {
        Optional<SegmentMetadata.Peer> peer;
        try {
            peer = metadata.lookup(name);
        } catch (MetadataException e) {
            throw new HandshakeException(ErrorCodes.METADATA, e.getMessage(), e);
        }
        if (peer.isEmpty()) {
            throw new HandshakeException(ErrorCodes.METADATA, "segment " + name + " is not published at "
                    + metadata.store() + " (key " + metadata.keys().segment(name) + ")");
        }
        SegmentDescriptor d = peer.get().descriptor();
        RpcMeta rpc = peer.get().rpc();
        String address = PeerAddress.format(rpc.ipOrHostName(), rpc.rpcPort());
        if (address.equals(d.name())) {
            return d;
        }
        return new SegmentDescriptor(address, d.protocol(), d.tcpDataPort(), d.tcpProtoVersion(), d.timestamp(),
                d.rdmaServerName(), d.buffers(), d.devices(), d.priorityMatrix(), d.extensions());
    }

    @Override
    public void close() {
        metadata.store().close();
    }
}
