package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineContractTest;
import io.mooncake4j.engine.core.CoreEngine;

/** The engine contract between two RDMA engines in one JVM, connected through the emulated fabric. */
class EmulatedRdmaContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        CoreEngine target = EmulatedEngines.started(fabric, "emu0");
        CoreEngine initiator = EmulatedEngines.started(fabric, "emu1");
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
        pair.target().close();
    }
}
