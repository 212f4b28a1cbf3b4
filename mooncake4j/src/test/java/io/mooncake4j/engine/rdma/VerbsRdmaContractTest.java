package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.spi.EngineSettings;
import java.net.InetAddress;
import org.junit.jupiter.api.Tag;

/**
 * The engine contract between two RDMA engines in one JVM over a real NIC (libibverbs): both open
 * {@code MC_TEST_RDMA_DEVICE} (else the first device), so their QPs meet through the port's
 * loopback. Skipped, with the diagnosis as reason, where RDMA is unavailable. Run with
 * {@code mvn -B test -Dgroups=rdma -DexcludedTestGroups=gpu} (see docs/rdma.md).
 */
@Tag("rdma")
class VerbsRdmaContractTest extends TransferEngineContractTest {

    static CoreEngine hardwareEngine() {
        assumeTrue(RdmaAvailability.isAvailable(),
                () -> RdmaAvailability.unavailabilityCause().map(RdmaAvailability.Cause::message).orElse(""));
        String dev = System.getenv("MC_TEST_RDMA_DEVICE");
        RdmaEngineConfig cfg = RdmaEngineConfig.fromEnvironment(EngineSettings.processEnvironment(),
                HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
        CoreEngine e = EmulatedEngines.alone(new VerbsRdmaProvider(), cfg,
                RdmaAvailability::unavailabilityCause);
        if (e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", dev == null ? "" : dev) != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    @Override
    protected Pair createPair() {
        CoreEngine target = hardwareEngine();
        CoreEngine initiator = hardwareEngine();
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        if (pair != null) {
            pair.initiator().close();
            pair.target().close();
        }
    }
}
