package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.internal.sys.SharedMemory;
import org.junit.jupiter.api.Assumptions;

/** The engine contract over the shm transport alone (the core with shm only), two engines in one JVM. */
class ShmContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        Assumptions.assumeTrue(SharedMemory.available(), "shm needs native access on Linux");
        CoreEngine target = started(EngineBuilder.only("shm"));
        CoreEngine initiator = started(EngineBuilder.only("shm"));
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    private static CoreEngine started(CoreEngine e) {
        if (e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "shm", "") != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    @Override
    protected void closePair(Pair pair) {
        if (pair != null) {
            pair.initiator().close();
            pair.target().close();
        }
    }
}
