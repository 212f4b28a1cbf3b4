package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.internal.sys.SharedMemory;
import org.junit.jupiter.api.Assumptions;

/** The engine contract over the shm transport alone (the core with shm only), two engines in one JVM. */
class ShmContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        Assumptions.assumeTrue(SharedMemory.available(), "shm needs native access on Linux");
        ShmDirectEngine target = started(new ShmDirectEngine());
        ShmDirectEngine initiator = started(new ShmDirectEngine());
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    private static ShmDirectEngine started(ShmDirectEngine e) {
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
