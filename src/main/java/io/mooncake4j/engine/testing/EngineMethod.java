package io.mooncake4j.engine.testing;

/** The {@link io.mooncake4j.engine.TransferEngine} methods a {@link ScriptedTransferEngine} records and scripts. */
public enum EngineMethod {
    INITIALIZE,
    REGISTER_MEMORY,
    BATCH_REGISTER_MEMORY,
    UNREGISTER_MEMORY,
    BATCH_UNREGISTER_MEMORY,
    BATCH_TRANSFER_SYNC_WRITE,
    BATCH_TRANSFER_SYNC_READ,
    OPEN_SEGMENT,
    ALLOCATE_BATCH_ID,
    SUBMIT_TRANSFER,
    FREE_BATCH_ID
}
