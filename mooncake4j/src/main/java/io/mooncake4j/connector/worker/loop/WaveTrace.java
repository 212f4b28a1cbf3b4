package io.mooncake4j.connector.worker.loop;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Timestamps of one pull's way through both workers, for the per-wave breakdown in
 * {@code docs/performance.md}. Off unless the JVM runs with
 * {@code -Dmooncake4j.waveTrace=true}; then each point keeps the {@link System#nanoTime()} of its
 * latest pass (one JVM-wide slot per point, so it is only meaningful for one pull at a time in one
 * process, as the benchmarks run it). Off, {@link #mark} is a constant-folded branch.
 *
 * <p>Thread-safe: any thread marks, any thread reads.
 */
public final class WaveTrace {

    /** Whether tracing is on (read once, at class initialisation). */
    public static final boolean ON = Boolean.getBoolean("mooncake4j.waveTrace");

    /** The points, in the order a pull passes them. */
    public enum Point {
        /** D: the receiver loop starts the step's pulls ({@code mooncake-d-receiver-0}). */
        D_LOAD_START,
        /** D: the pull's metadata encoded and handed to the I/O thread (receiver loop). */
        D_PULL_SUBMITTED,
        /** D: the pull's metadata frame about to go to its DEALER ({@code mooncake-d-io-0}). */
        D_PULL_SENT,
        /** P: the message read from the ROUTER ({@code mooncake-p-listener-0}). */
        P_RECEIVED,
        /** P: the handler starts on the sender loop. */
        P_HANDLER,
        /** P: the pull's metadata decoded and its region pairs prepared (sender loop). */
        P_PREPARED,
        /** P: a wave's descriptors handed to the transfer pool (sender loop). */
        P_WAVE_SUBMIT,
        /** P: the engine write starts ({@code mooncake-p-xfer-n}). */
        P_WRITE_START,
        /** P: the engine write returned. */
        P_WRITE_END,
        /** P: the wave's answer about to be queued for the listener (transfer thread, or sender loop). */
        P_REPLY_QUEUED,
        /** P: the answer about to be written to the ROUTER (listener). */
        P_REPLY_SENT,
        /** D: the answer read from the DEALER ({@code mooncake-d-io-0}). */
        D_RESPONSE_READ,
        /** D: the request about to be queued as finished for {@code getFinished} ({@code mooncake-d-io-0}). */
        D_FINISHED
    }

    private static final AtomicLongArray LAST = new AtomicLongArray(Point.values().length);

    private WaveTrace() {
    }

    public static void mark(Point p) {
        if (ON) {
            LAST.set(p.ordinal(), System.nanoTime());
        }
    }

    /** The latest pass of {@code p} ({@link System#nanoTime()}), 0 if none. */
    public static long last(Point p) {
        return LAST.get(p.ordinal());
    }
}
