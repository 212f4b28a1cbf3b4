package io.mooncake4j.connector.worker.plan;

import java.util.List;

/**
 * The aligned local/remote region pairs of one side-channel message with the per-pair sender
 * plan precomputed (offsets, length, coalescing), flattened into primitive arrays so that
 * planning a wave touches no objects per region. Built by
 * {@link TransferPlanner#prepare}; immutable; {@link #error()} non-null means the whole
 * message must be answered with {@code ERROR} and that message.
 */
public final class PreparedRegions {

    final List<TransferRegion> local;
    final List<TransferRegion> remote;
    final String error;
    final int count;
    final int[] group;
    final long[] srcBase;
    final long[] dstBase;
    final long[] srcStride;
    final long[] dstStride;
    final long[] srcOffset;
    final long[] dstOffset;
    final long[] transferLen;
    final boolean[] shouldTransfer;
    final boolean[] coalesce;
    final boolean[] planFailed;
    /** Raised when the pair is reached at all (vLLM asserts before looking at the blocks). */
    final String[] preError;
    /** Raised when the pair is reached with blocks to send (vLLM asserts inside the plan). */
    final String[] postError;

    PreparedRegions(List<TransferRegion> local, List<TransferRegion> remote, String error, int count) {
        this.local = List.copyOf(local);
        this.remote = List.copyOf(remote);
        this.error = error;
        this.count = count;
        group = new int[count];
        srcBase = new long[count];
        dstBase = new long[count];
        srcStride = new long[count];
        dstStride = new long[count];
        srcOffset = new long[count];
        dstOffset = new long[count];
        transferLen = new long[count];
        shouldTransfer = new boolean[count];
        coalesce = new boolean[count];
        planFailed = new boolean[count];
        preError = new String[count];
        postError = new String[count];
    }

    static PreparedRegions failed(String error) {
        return new PreparedRegions(List.of(), List.of(), error, 0);
    }

    /** Null when the regions are usable, else the {@code ERROR} message for the whole message. */
    public String error() {
        return error;
    }

    public boolean ok() {
        return error == null;
    }

    /** The aligned local regions (local registration order). */
    public List<TransferRegion> local() {
        return local;
    }

    /** The remote regions paired with {@link #local()}, index by index. */
    public List<TransferRegion> remote() {
        return remote;
    }

    /** Number of aligned pairs. */
    public int size() {
        return count;
    }

    /** The sender plan of pair {@code i}, or null when computing it fails (see {@code TransferPlanner}). */
    public SenderTransferPlan plan(int i) {
        java.util.Objects.checkIndex(i, count);
        if (planFailed[i]) {
            return null;
        }
        return new SenderTransferPlan(shouldTransfer[i], srcOffset[i], dstOffset[i], transferLen[i]);
    }

    /** Whether pair {@code i} writes one descriptor per contiguous run (else one per block). */
    public boolean coalesces(int i) {
        return coalesce[java.util.Objects.checkIndex(i, count)];
    }
}
