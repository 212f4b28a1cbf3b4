package io.mooncake4j.connector.worker.plan;

/**
 * What one P rank writes of each block of one aligned region pair: the result of vLLM's
 * {@code _compute_sender_transfer_plan} (spec §6.10).
 *
 * @param shouldTransfer false when another P rank sends these bytes (replicated KV)
 * @param srcOffset      byte offset inside a local block
 * @param dstOffset      byte offset inside a remote block
 * @param transferLen    bytes per block
 */
public record SenderTransferPlan(boolean shouldTransfer, long srcOffset, long dstOffset, long transferLen) {
}
