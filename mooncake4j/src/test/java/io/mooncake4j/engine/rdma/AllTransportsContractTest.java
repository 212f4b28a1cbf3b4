package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The engine contract against the engine core with every transport installed (shm, rdma over the
 * emulated fabric, tcp), two engines in one JVM: selection picks per request, the behaviour stays.
 */
class AllTransportsContractTest extends TransferEngineContractTest {

    static CoreEngine all(EmulatedRdmaProvider fabric, String device) {
        RdmaEngineConfig cfg = EmulatedEngines.config();
        TcpConfig tcp = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
        CoreEngine e = new EngineBuilder().settings(new EngineSettings(cfg.handshake(), cfg.transferTimeoutMs(), 64, Map.of())).environment(Map.of()).offer(
                new TransportFactory(ShmTransport.DECLARATION, ShmTransport::new),
                new TransportFactory(RdmaTransport.DECLARATION, () -> new RdmaTransport(fabric, cfg, Optional::empty,
                        GpuDirectSupport.cuda())),
                new TransportFactory(TcpTransport.DECLARATION, () -> new TcpTransport(tcp))).build();
        if (e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", device) != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    @Override
    protected Pair createPair() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        CoreEngine target = all(fabric, "emu0");
        CoreEngine initiator = all(fabric, "emu1");
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
        pair.target().close();
    }
}
