package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.TransferEngineContractTest;

/** The contract for transfers from a TCP engine to its own segment (direct memory copy). */
class LocalShortCircuitContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        TcpTransferEngine e = TcpEngines.started();
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
    }
}
