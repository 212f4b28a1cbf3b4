package io.mooncake4j.connector.worker.loop;

/**
 * Where the send and receive paths record their transfers for vLLM's KV connector stats. The worker
 * hands them its {@code io.mooncake4j.connector.worker.MooncakeKvConnectorStats} through this interface,
 * so that these packages need nothing from the worker's package. Implementations are thread-safe (the
 * transfer pool, the sender loop and the receiver record concurrently).
 */
public interface TransferRecorder {

    /**
     * One successful {@code batchTransferSyncWrite}: its duration, bytes and descriptor count (P).
     *
     * @param durationSeconds its duration in seconds
     * @param totalBytes      the bytes it moved
     * @param numDescriptors  its descriptors
     */
    void recordTransfer(double durationSeconds, long totalBytes, long numDescriptors);

    /** One failed transfer (P). */
    void recordFailedTransfer();

    /** One failed receive (D). */
    void recordFailedRecv();

    /** One send that expired after the abort timeout (P). */
    void recordKvExpiredReq();
}
