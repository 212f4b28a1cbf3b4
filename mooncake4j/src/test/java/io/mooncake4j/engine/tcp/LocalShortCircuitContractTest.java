package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;

/** The contract for transfers from a TCP engine to its own segment (direct memory copy). */
class LocalShortCircuitContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        CoreEngine e = TcpEngines.started();
        return new Pair(e, e, e.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
    }
}
