package io.mooncake4j.cli;

/**
 * A fixed-size log-linear histogram of nanosecond latencies: 64 sub-buckets per power of two, so a
 * reported percentile is within about 1.6% of the true value; the maximum is exact. Recording never
 * allocates. Not thread-safe: one per recording thread, {@link #add merged} after the threads end.
 */
final class LatencyHistogram {

    private static final int SUB_BITS = 6;
    private static final int SUB = 1 << SUB_BITS;
    // values < 64 get their own bucket; each larger power of two 2^e (e = 6..62) gets 64 buckets
    static final int BUCKETS = SUB + (63 - SUB_BITS) * SUB;

    private final long[] counts = new long[BUCKETS];
    private long total;
    private long max;

    void record(long nanos) {
        long v = Math.max(0, nanos);
        counts[index(v)]++;
        total++;
        if (v > max) {
            max = v;
        }
    }

    static int index(long v) {
        if (v < SUB) {
            return (int) v;
        }
        int e = 63 - Long.numberOfLeadingZeros(v); // >= SUB_BITS
        int sub = (int) ((v >>> (e - SUB_BITS)) & (SUB - 1));
        return SUB + (e - SUB_BITS) * SUB + sub;
    }

    /** The smallest value that falls into bucket {@code i}. */
    static long lowerBound(int i) {
        if (i < SUB) {
            return i;
        }
        int e = (i - SUB) / SUB + SUB_BITS;
        long sub = (i - SUB) % SUB;
        return (SUB + sub) << (e - SUB_BITS);
    }

    void add(LatencyHistogram other) {
        for (int i = 0; i < BUCKETS; i++) {
            counts[i] += other.counts[i];
        }
        total += other.total;
        max = Math.max(max, other.max);
    }

    long count() {
        return total;
    }

    long max() {
        return max;
    }

    /** The {@code q}-quantile (0 &lt; q &le; 1) as the middle of its bucket, never above the maximum; 0 if empty. */
    long percentile(double q) {
        if (total == 0) {
            return 0;
        }
        long rank = Math.max(1, (long) Math.ceil(q * total));
        long seen = 0;
        for (int i = 0; i < BUCKETS; i++) {
            seen += counts[i];
            if (seen >= rank) {
                long lo = lowerBound(i);
                long hi = i + 1 < BUCKETS ? lowerBound(i + 1) : Long.MAX_VALUE;
                return Math.min(max, lo + (hi - lo) / 2);
            }
        }
        return max;
    }
}
