package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineContractTest;

/** The engine contract for transfers from an RDMA engine to its own segment (QPs wired to themselves). */
class EmulatedRdmaLoopbackContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        RdmaTransferEngine e = EmulatedEngines.started(new EmulatedRdmaProvider("emu0"), "");
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
    }
}
