package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.List;

/**
 * A scripted peer for initiator tests: a real handshake server that advertises a descriptor of
 * the test's choosing (one buffer, a data port, a protocol version), and optionally a raw data
 * listener the test drives by hand.
 */
final class FakePeer implements AutoCloseable {

    final HandshakeServer handshake;
    final ServerSocket data;
    private volatile SegmentDescriptor descriptor;

    /** A fake whose data port is {@code dataPort} (0 = open a raw listener for the test). */
    FakePeer(long bufAddr, long bufLen, int dataPort, int protoVersion) throws IOException {
        if (dataPort == 0) {
            data = new ServerSocket();
            data.bind(new InetSocketAddress(TcpEngines.LOOPBACK, 0));
        } else {
            data = null;
        }
        handshake = HandshakeServer.start(HandshakeConfig.ephemeral(TcpEngines.LOOPBACK), (type, req) ->
                type == HandshakeFrame.METADATA ? descriptor.toJson() : null);
        String name = name();
        int port = data == null ? dataPort : data.getLocalPort();
        descriptor = new SegmentDescriptor(name, "tcp", port, protoVersion, SegmentDescriptor.now(), null,
                List.of(SegmentDescriptor.Buffer.tcp(name, bufAddr, bufLen)), null, null);
    }

    String name() {
        return "127.0.0.1:" + handshake.port();
    }

    @Override
    public void close() throws IOException {
        handshake.close();
        if (data != null) {
            data.close();
        }
    }
}
