package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;

/** The engine contract for transfers from an RDMA engine to its own segment (QPs wired to themselves). */
class EmulatedRdmaLoopbackContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        CoreEngine e = EmulatedEngines.started(new EmulatedRdmaProvider("emu0"), "");
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
    }
}
