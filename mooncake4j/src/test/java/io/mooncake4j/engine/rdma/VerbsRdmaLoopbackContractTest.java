package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;
import org.junit.jupiter.api.Tag;

/** The engine contract for transfers to an engine's own segment over a real NIC (QPs wired to themselves). */
@Tag("rdma")
class VerbsRdmaLoopbackContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        CoreEngine e = VerbsRdmaContractTest.hardwareEngine();
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        if (pair != null) {
            pair.initiator().close();
        }
    }
}
