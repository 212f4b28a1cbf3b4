package io.mooncake4j.engine.testing;

import io.mooncake4j.engine.TransferEngineContractTest;

/** The contract for the scripted engine in copy mode, so connector tests can rely on it. */
class ScriptedCopyContractTest extends TransferEngineContractTest {

    @Override
    protected Pair createPair() {
        ScriptedTransferEngine target = new ScriptedTransferEngine().copyData(true);
        ScriptedTransferEngine initiator = new ScriptedTransferEngine().copyData(true);
        target.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "");
        initiator.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "");
        return new Pair(initiator, target, target.getLocalSegmentName());
    }

    @Override
    protected boolean fetchesDescriptors() {
        return false;
    }

    @Override
    protected void closePair(Pair pair) {
        pair.initiator().close();
        pair.target().close();
    }
}
