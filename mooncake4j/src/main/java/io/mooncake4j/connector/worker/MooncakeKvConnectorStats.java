package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.loop.TransferRecorder;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's {@code MooncakeKVConnectorStats}: transfer statistics of one worker between two
 * {@link #cloneAndReset()} calls.
 *
 * <p>Writers: P transfer threads ({@link #recordTransfer}, {@link #recordFailedTransfer}), the P
 * sender loop ({@link #recordKvExpiredReq}), the D receiver loop ({@link #recordFailedRecv});
 * reader: the embedder's thread ({@link #cloneAndReset()}, {@link #reduce()}). All methods are
 * thread-safe (one lock per instance, as vLLM's {@code _lock}); a row of
 * {@code recordTransfer} is appended atomically. Values are kept in primitive arrays (no boxing
 * per record).
 *
 * <p>{@link #reduce()} returns exactly vLLM's keys and numbers: means and sums as numpy computes
 * them (pairwise summation), the 90th percentile with numpy's default {@code linear} method, and
 * Python's {@code round(x, ndigits)} (round-half-even on the exact binary value).
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/stats.py</a>
 */
public final class MooncakeKvConnectorStats {

    /** vLLM's {@link #reduce()} key for successful transfers. */
    public static final String NUM_SUCCESSFUL_TRANSFERS = "Num successful transfers";
    /** vLLM's {@link #reduce()} key for the mean transfer time in ms. */
    public static final String AVG_XFER_TIME_MS = "Avg xfer time (ms)";
    /** vLLM's {@link #reduce()} key for the 90th percentile of the transfer time in ms. */
    public static final String P90_XFER_TIME_MS = "P90 xfer time (ms)";
    /** vLLM's {@link #reduce()} key for the mean MB per transfer. */
    public static final String AVG_MB_PER_TRANSFER = "Avg MB per transfer";
    /** vLLM's {@link #reduce()} key for the throughput in MB/s. */
    public static final String THROUGHPUT_MB_S = "Throughput (MB/s)";
    /** vLLM's {@link #reduce()} key for the mean descriptors per transfer. */
    public static final String AVG_NUMBER_OF_DESCRIPTORS = "Avg number of descriptors";
    /** vLLM's {@link #reduce()} key for failed transfers. */
    public static final String NUM_FAILED_TRANSFERS = "Num failed transfers";
    /** vLLM's {@link #reduce()} key for failed receives. */
    public static final String NUM_FAILED_RECVS = "Num failed recvs";
    /** vLLM's {@link #reduce()} key for sends expired after the abort timeout. */
    public static final String NUM_KV_EXPIRED_REQS = "Num KV expired reqs";

    private final Object lock = new Object();
    // all guarded by lock
    private double[] durations;
    private long[] bytes;
    private long[] descriptors;
    private int transfers;
    private long failedTransfers;
    private long failedRecvs;
    private long expiredReqs;

    /** Empty statistics. */
    public MooncakeKvConnectorStats() {
        reset();
    }

    private MooncakeKvConnectorStats(double[] durations, long[] bytes, long[] descriptors, int transfers,
            long failedTransfers, long failedRecvs, long expiredReqs) {
        this.durations = durations;
        this.bytes = bytes;
        this.descriptors = descriptors;
        this.transfers = transfers;
        this.failedTransfers = failedTransfers;
        this.failedRecvs = failedRecvs;
        this.expiredReqs = expiredReqs;
    }

    /** vLLM's {@code reset()}: forgets everything. */
    public void reset() {
        synchronized (lock) {
            durations = new double[16];
            bytes = new long[16];
            descriptors = new long[16];
            transfers = 0;
            failedTransfers = 0;
            failedRecvs = 0;
            expiredReqs = 0;
        }
    }

    private void grow(int need) {
        if (need > durations.length) {
            int cap = Math.max(need, durations.length * 2);
            durations = Arrays.copyOf(durations, cap);
            bytes = Arrays.copyOf(bytes, cap);
            descriptors = Arrays.copyOf(descriptors, cap);
        }
    }

    /**
     * One successful {@code batchTransferSyncWrite}: its duration, bytes and descriptor count.
     *
     * @param durationSeconds its duration in seconds
     * @param totalBytes      the bytes it moved
     * @param numDescriptors  its descriptors
     */
    public void recordTransfer(double durationSeconds, long totalBytes, long numDescriptors) {
        synchronized (lock) {
            grow(transfers + 1);
            durations[transfers] = durationSeconds;
            bytes[transfers] = totalBytes;
            descriptors[transfers] = numDescriptors;
            transfers++;
        }
    }

    /** One failed transfer (P). */
    public void recordFailedTransfer() {
        synchronized (lock) {
            failedTransfers++;
        }
    }

    /** One failed receive (D). */
    public void recordFailedRecv() {
        synchronized (lock) {
            failedRecvs++;
        }
    }

    /** One send that expired after the abort timeout (P). */
    public void recordKvExpiredReq() {
        synchronized (lock) {
            expiredReqs++;
        }
    }

    /** These stats as the send and receive paths record into them. */
    TransferRecorder recorder() {
        return new TransferRecorder() {
            @Override
            public void recordTransfer(double durationSeconds, long totalBytes, long numDescriptors) {
                MooncakeKvConnectorStats.this.recordTransfer(durationSeconds, totalBytes, numDescriptors);
            }

            @Override
            public void recordFailedTransfer() {
                MooncakeKvConnectorStats.this.recordFailedTransfer();
            }

            @Override
            public void recordFailedRecv() {
                MooncakeKvConnectorStats.this.recordFailedRecv();
            }

            @Override
            public void recordKvExpiredReq() {
                MooncakeKvConnectorStats.this.recordKvExpiredReq();
            }
        };
    }

    /** {@return vLLM's {@code clone_and_reset()}: a copy of the current values, leaving this instance empty} */
    public MooncakeKvConnectorStats cloneAndReset() {
        synchronized (lock) {
            MooncakeKvConnectorStats copy = snapshotLocked();
            reset();
            return copy;
        }
    }

    /** {@return a copy of the current values} */
    public MooncakeKvConnectorStats copy() {
        synchronized (lock) {
            return snapshotLocked();
        }
    }

    private MooncakeKvConnectorStats snapshotLocked() {
        int cap = Math.max(16, transfers);
        return new MooncakeKvConnectorStats(Arrays.copyOf(durations, cap), Arrays.copyOf(bytes, cap),
                Arrays.copyOf(descriptors, cap), transfers, failedTransfers, failedRecvs, expiredReqs);
    }

    /** {@return vLLM's {@code is_empty()}: no successful transfer and no failure of any kind} */
    public boolean isEmpty() {
        synchronized (lock) {
            return transfers == 0 && failedTransfers == 0 && failedRecvs == 0 && expiredReqs == 0;
        }
    }

    /** Receives the successful transfers of a snapshot, one call each, in the order recorded. */
    @FunctionalInterface
    public interface TransferVisitor {
        /**
         * One successful transfer.
         *
         * @param durationSeconds its duration
         * @param totalBytes      its bytes
         * @param numDescriptors  its descriptors
         */
        void transfer(double durationSeconds, long totalBytes, long numDescriptors);
    }

    /**
     * Visits every successful transfer recorded (metrics binders turn them into histograms); the
     * values are copied first, so {@code visitor} runs without the lock.
     *
     * @param visitor called once per transfer
     */
    public void forEachTransfer(TransferVisitor visitor) {
        Objects.requireNonNull(visitor, "visitor");
        double[] dur;
        long[] by;
        long[] de;
        synchronized (lock) {
            dur = Arrays.copyOf(durations, transfers);
            by = Arrays.copyOf(bytes, transfers);
            de = Arrays.copyOf(descriptors, transfers);
        }
        for (int i = 0; i < dur.length; i++) {
            visitor.transfer(dur[i], by[i], de[i]);
        }
    }

    /** {@return vLLM's {@code num_successful_transfers}} */
    public int numSuccessfulTransfers() {
        synchronized (lock) {
            return transfers;
        }
    }

    /** {@return vLLM's {@code num_failed_transfers}: failed transfers (P)} */
    public long numFailedTransfers() {
        synchronized (lock) {
            return failedTransfers;
        }
    }

    /** {@return vLLM's {@code num_failed_recvs}: failed receives (D)} */
    public long numFailedRecvs() {
        synchronized (lock) {
            return failedRecvs;
        }
    }

    /** {@return vLLM's {@code num_kv_expired_reqs}: sends expired after the abort timeout (P)} */
    public long numKvExpiredReqs() {
        synchronized (lock) {
            return expiredReqs;
        }
    }

    /**
     * vLLM's {@code aggregate(other)}: appends {@code other}'s values (unless it is empty) and
     * returns {@code this}. {@code other} is copied first, so the two locks are never held together.
     *
     * @param other the statistics to add
     * @return this object
     */
    public MooncakeKvConnectorStats aggregate(MooncakeKvConnectorStats other) {
        Objects.requireNonNull(other, "other");
        if (other == this) {
            other = copy();
        }
        MooncakeKvConnectorStats o = other.copy();
        if (o.isEmpty()) {
            return this;
        }
        synchronized (lock) {
            grow(transfers + o.transfers);
            System.arraycopy(o.durations, 0, durations, transfers, o.transfers);
            System.arraycopy(o.bytes, 0, bytes, transfers, o.transfers);
            System.arraycopy(o.descriptors, 0, descriptors, transfers, o.transfers);
            transfers += o.transfers;
            failedTransfers += o.failedTransfers;
            failedRecvs += o.failedRecvs;
            expiredReqs += o.expiredReqs;
        }
        return this;
    }

    /**
     * vLLM's {@code reduce()}: the summary, keys in vLLM's order. With no successful transfer the
     * five figures are the integer 0 ({@code Long}); otherwise "Num successful transfers" is a
     * {@code Long} and the figures are {@code Double}s: mean and numpy-linear P90 of the durations
     * in ms (3 decimals), mean MiB per transfer (3 decimals), total MiB / total seconds (3
     * decimals; 0.0 when the total time is 0), mean descriptors (1 decimal). The failure counts
     * are {@code Long}s.
     *
     * @return the summary: vLLM's keys to their values
     */
    public Map<String, Number> reduce() {
        double[] dur;
        long[] by;
        long[] de;
        int n;
        long ft;
        long fr;
        long ex;
        synchronized (lock) {
            n = transfers;
            dur = Arrays.copyOf(durations, n);
            by = Arrays.copyOf(bytes, n);
            de = Arrays.copyOf(descriptors, n);
            ft = failedTransfers;
            fr = failedRecvs;
            ex = expiredReqs;
        }
        Map<String, Number> out = new LinkedHashMap<>();
        if (n == 0) {
            out.put(NUM_SUCCESSFUL_TRANSFERS, 0L);
            out.put(AVG_XFER_TIME_MS, 0L);
            out.put(P90_XFER_TIME_MS, 0L);
            out.put(AVG_MB_PER_TRANSFER, 0L);
            out.put(THROUGHPUT_MB_S, 0L);
            out.put(AVG_NUMBER_OF_DESCRIPTORS, 0L);
        } else {
            double[] mb = new double[n];
            double[] descs = new double[n];
            for (int i = 0; i < n; i++) {
                mb[i] = by[i] / 1048576.0;
                descs[i] = de[i];
            }
            double totalMb = numpySum(mb);
            double totalTime = numpySum(dur);
            out.put(NUM_SUCCESSFUL_TRANSFERS, (long) n);
            out.put(AVG_XFER_TIME_MS, pyRound(numpySum(dur) / n * 1e3, 3));
            out.put(P90_XFER_TIME_MS, pyRound(numpyPercentileLinear(dur, 90) * 1e3, 3));
            out.put(AVG_MB_PER_TRANSFER, pyRound(totalMb / n, 3));
            out.put(THROUGHPUT_MB_S, totalTime == 0 ? 0.0 : pyRound(totalMb / totalTime, 3));
            out.put(AVG_NUMBER_OF_DESCRIPTORS, pyRound(numpySum(descs) / n, 1));
        }
        out.put(NUM_FAILED_TRANSFERS, ft);
        out.put(NUM_FAILED_RECVS, fr);
        out.put(NUM_KV_EXPIRED_REQS, ex);
        return Collections.unmodifiableMap(out);
    }

    @Override
    public String toString() {
        return "MooncakeKvConnectorStats" + reduce();
    }

    // ------------------------------------------------------------------ numpy / Python arithmetic

    /** {@code np.add.reduce} of a contiguous float64 array: 0.0 + numpy's pairwise sum. */
    static double numpySum(double[] a) {
        return 0.0 + pairwiseSum(a, 0, a.length);
    }

    /** numpy's {@code pairwise_sum} (block size 128, 8 accumulators). */
    private static double pairwiseSum(double[] a, int off, int n) {
        if (n < 8) {
            double res = 0.0;
            for (int i = 0; i < n; i++) {
                res += a[off + i];
            }
            return res;
        }
        if (n <= 128) {
            double r0 = a[off];
            double r1 = a[off + 1];
            double r2 = a[off + 2];
            double r3 = a[off + 3];
            double r4 = a[off + 4];
            double r5 = a[off + 5];
            double r6 = a[off + 6];
            double r7 = a[off + 7];
            int i;
            for (i = 8; i < n - (n % 8); i += 8) {
                r0 += a[off + i];
                r1 += a[off + i + 1];
                r2 += a[off + i + 2];
                r3 += a[off + i + 3];
                r4 += a[off + i + 4];
                r5 += a[off + i + 5];
                r6 += a[off + i + 6];
                r7 += a[off + i + 7];
            }
            double res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
            for (; i < n; i++) {
                res += a[off + i];
            }
            return res;
        }
        int n2 = n / 2;
        n2 -= n2 % 8;
        return pairwiseSum(a, off, n2) + pairwiseSum(a, off + n2, n - n2);
    }

    /** {@code np.percentile(a, q)} with the default {@code method="linear"}; {@code a} non-empty. */
    static double numpyPercentileLinear(double[] a, double q) {
        double[] sorted = a.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        double virtualIndex = (n - 1) * (q / 100.0);
        double prevIdx = Math.floor(virtualIndex);
        int prev = (int) Math.max(0, Math.min(prevIdx, n - 1));
        int next = Math.min(prev + 1, n - 1);
        if (virtualIndex >= n - 1) {
            prev = n - 1;
            next = n - 1;
        }
        double gamma = virtualIndex - prevIdx;
        double lo = sorted[prev];
        double hi = sorted[next];
        double diff = hi - lo;
        return gamma >= 0.5 ? hi - diff * (1 - gamma) : lo + diff * gamma;
    }

    /** Python's {@code round(x, ndigits)} for a finite float. */
    static double pyRound(double x, int ndigits) {
        if (Double.isNaN(x) || Double.isInfinite(x)) {
            return x;
        }
        return new BigDecimal(x).setScale(ndigits, RoundingMode.HALF_EVEN).doubleValue();
    }
}
