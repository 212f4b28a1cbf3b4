package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;

/** The contract between two TCP engines over 127.0.0.1 with gathering writes off (one write per piece). */
class TcpLoopbackNoGatherContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        TcpConfig cfg = TcpEngines.config().withGatherWrites(false);
        CoreEngine target = TcpEngines.started(cfg);
        CoreEngine initiator = TcpEngines.started(cfg);
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
        pair.target().close();
    }
}
