package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;

/** The contract between two TCP engines in one JVM over 127.0.0.1. */
class TcpLoopbackContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        CoreEngine target = TcpEngines.started();
        CoreEngine initiator = TcpEngines.started();
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
        pair.target().close();
    }
}
