package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineContractTest;
import org.junit.jupiter.api.Tag;

/** The engine contract for transfers to an engine's own segment over a real NIC (QPs wired to themselves). */
@Tag("rdma")
class VerbsRdmaLoopbackContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        RdmaTransferEngine e = VerbsRdmaContractTest.hardwareEngine();
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        if (pair != null) {
            pair.initiator().close();
        }
    }
}
