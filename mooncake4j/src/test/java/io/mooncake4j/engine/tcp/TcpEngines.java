package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.net.InetAddress;
import java.util.Map;

/** Test helpers: TCP engines on 127.0.0.1 with OS-assigned ports. */
final class TcpEngines {

    static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();

    private TcpEngines() {}

    static TcpConfig config() {
        return TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(LOOPBACK));
    }

    static TcpTransferEngine started(TcpConfig cfg) {
        return started(new TcpTransferEngine(cfg));
    }

    /** Initialises {@code e} on 127.0.0.1 (closing it when that fails). */
    static TcpTransferEngine started(TcpTransferEngine e) {
        if (e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0) {
            e.close();
            throw new AssertionError("initialize failed");
        }
        return e;
    }

    static TcpTransferEngine started() {
        return started(config());
    }
}
