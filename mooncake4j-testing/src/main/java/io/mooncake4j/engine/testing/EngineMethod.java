package io.mooncake4j.engine.testing;

/** The {@link io.mooncake4j.engine.TransferEngine} methods a {@link ScriptedTransferEngine} records and scripts. */
public enum EngineMethod {
    /** {@link io.mooncake4j.engine.TransferEngine#initialize}. */
    INITIALIZE,
    /** {@link io.mooncake4j.engine.TransferEngine#registerMemory}. */
    REGISTER_MEMORY,
    /** {@link io.mooncake4j.engine.TransferEngine#batchRegisterMemory}. */
    BATCH_REGISTER_MEMORY,
    /** {@link io.mooncake4j.engine.TransferEngine#unregisterMemory}. */
    UNREGISTER_MEMORY,
    /** {@link io.mooncake4j.engine.TransferEngine#batchUnregisterMemory}. */
    BATCH_UNREGISTER_MEMORY,
    /** {@link io.mooncake4j.engine.TransferEngine#batchTransferSyncWrite}. */
    BATCH_TRANSFER_SYNC_WRITE,
    /** {@link io.mooncake4j.engine.TransferEngine#batchTransferSyncRead}. */
    BATCH_TRANSFER_SYNC_READ,
    /** {@link io.mooncake4j.engine.TransferEngine#openSegment}. */
    OPEN_SEGMENT,
    /** {@link io.mooncake4j.engine.TransferEngine#allocateBatchId}. */
    ALLOCATE_BATCH_ID,
    /** {@link io.mooncake4j.engine.TransferEngine#submitTransfer}. */
    SUBMIT_TRANSFER,
    /** {@link io.mooncake4j.engine.TransferEngine#freeBatchId}. */
    FREE_BATCH_ID
}
