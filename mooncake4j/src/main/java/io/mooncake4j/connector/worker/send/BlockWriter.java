package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.TransferRecorder;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.engine.TransferEngine;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The write into D's blocks that a wave ({@link Waves}) or a layer-wise push ({@link LayerwisePush})
 * submits to the {@link TransferPool}: the abandonment and staleness checks made just before it, vLLM's
 * {@code _send_blocks}, and the refusal of a destination that is P's own engine ({@link SelfTargets}).
 * It owns the self targets, whether self-aimed pulls are accepted (a kv_both worker), the count of pulls
 * and writes refused for aiming at P itself, and the count of stale waves.
 *
 * <p><b>Threads.</b> {@link #write} and {@link #sendBlocks} run on the transfer-pool threads
 * ({@code mooncake-p-xfer-<n>}); {@link #selfRefusal} on the sender loop; {@link #acceptSelfAimedPulls}
 * (before the first pull) and the counter from any thread. Its own state is thread-safe (a volatile flag,
 * a {@link LongAdder}, the thread-safe {@link SelfTargets}).
 */
final class BlockWriter {

    /** The send path's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    /** The error of requests whose wave could not start before D may have given up. */
    static final String STALE_WAVE_MESSAGE = "P could not start the transfer within the abort timeout of its last "
            + "contact with D; nothing was written (D may have given up on these blocks).";
    /** {@link #write}'s result for a wave that was not written because it was stale. */
    static final int STALE = Integer.MIN_VALUE;
    /** {@link #write}'s result for a wave of a pull P abandoned (side channel reset, shutdown). */
    static final int ABANDONED = Integer.MIN_VALUE + 1;
    /** {@link #write}'s result for a write whose destination resolved to P's own engine (not written). */
    static final int SELF_AIMED = Integer.MIN_VALUE + 2;
    static final String ABANDONED_MESSAGE = "P abandoned this pull (its side channel was reset or it is shutting "
            + "down); nothing was written.";

    private final TransferEngine engine;
    private final TransferRecorder stats;
    private final BackgroundErrors errors;
    private final TransferPool pool;
    private final LongSupplier clock;
    private final long abortNanos;
    /** What P's own engine is called and where it listens. */
    private final SelfTargets selfTargets;
    /** A kv_both worker: its own receiver's pulls name its own engine (set before the first pull). */
    private volatile boolean selfAimedPullsAccepted;
    /** Waves (and layer-wise writes) not written because they were stale or their pull was abandoned. */
    private final LongAdder staleWaves = new LongAdder();
    /** Pulls (or writes) refused because their destination is P's own engine. */
    private final LongAdder selfAimedRefusals = new LongAdder();

    BlockWriter(TransferEngine engine, TransferRecorder stats, BackgroundErrors errors, TransferPool pool,
            LongSupplier clock, long abortNanos) {
        this.engine = engine;
        this.stats = stats;
        this.errors = errors;
        this.pool = pool;
        this.clock = clock;
        this.abortNanos = abortNanos;
        String segment = engine.getLocalSegmentName();
        int colon = segment.lastIndexOf(':');
        this.selfTargets = new SelfTargets(segment, engine.getRpcPort(),
                colon < 0 ? segment : segment.substring(0, colon));
    }

    /**
     * Writes {@code pull}'s descriptors to {@code session} (transfer-pool thread), unless the pull was
     * ended ({@link #ABANDONED}) or the write would start later than the abort timeout after P's last
     * contact with D ({@link #STALE}); the engine's result otherwise.
     */
    int write(Pull pull, long contact, String session, long[] src, long[] dst, long[] len, long bytes) {
        int ret;
        pool.writeStarted(); // before the check: abandonAllPulls' waiter sees this write
        try {
            if (pull.done) {
                ret = ABANDONED;
            } else if (clock.getAsLong() - contact - abortNanos > 0) {
                ret = STALE; // D may have given up: its blocks may belong to another request by now
            } else {
                ret = sendBlocks(session, src, dst, len, bytes);
            }
        } finally {
            pool.writeEnded();
        }
        return ret;
    }

    /**
     * The ERROR text for a pull whose destination {@code host:port} is P's own engine by name or address
     * literal, else null (sender loop: no lookup); null always once self-aimed pulls are accepted.
     */
    String selfRefusal(String host, int port) {
        return selfAimedPullsAccepted ? null : selfTargets.refusal(host, port);
    }

    /** A kv_both worker: pulls that name this engine are served. Call before the first pull. */
    void acceptSelfAimedPulls() {
        selfAimedPullsAccepted = true;
    }

    private static int port(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /**
     * vLLM's {@code _send_blocks}, on a transfer-pool thread; {@link #SELF_AIMED} for P's own engine, found
     * before the write or by the engine as it connected. No retry.
     */
    int sendBlocks(String session, long[] src, long[] dst, long[] len, long bytes) {
        int colon = session.lastIndexOf(':');
        if (!selfAimedPullsAccepted && ((colon > 0
                && selfTargets.resolvesToSelf(session.substring(0, colon), port(session.substring(colon + 1))))
                || engine.isOwnSegment(session))) {
            // a name that resolves to P itself, or whose descriptor (any name, port, forwarder or metadata
            // path) is P's own engine's: nothing is written
            return SELF_AIMED;
        }
        WaveTrace.mark(WaveTrace.Point.P_WRITE_START);
        long t0 = System.nanoTime();
        int ret;
        try {
            ret = engine.batchTransferSyncWrite(session, src, dst, len);
        } catch (RuntimeException | Error e) {
            errors.report("transfer pool", e);
            ret = -1;
        }
        WaveTrace.mark(WaveTrace.Point.P_WRITE_END);
        double dt = (System.nanoTime() - t0) / 1e9;
        if (ret != 0 && !selfAimedPullsAccepted && engine.refusedAsOwnSegment(session)) {
            // the engine found P's own engine there only as it connected (a descriptor fetched again, or a data
            // address resolved now, is ours): refused without a byte written, a self-aimed refusal like above
            return SELF_AIMED;
        }
        if (ret == 0) {
            stats.recordTransfer(dt, bytes, src.length);
            LOG.debug("Sending to {} done, took {}", session, dt);
        } else {
            stats.recordFailedTransfer();
            LOG.warn("Sending to {} failed (ret={}) after {} ({} descriptors, {} bytes)", session, ret, dt, src.length,
                    bytes);
        }
        return ret;
    }

    /** Counts a wave (or layer-wise write) that was not written: stale, or of an abandoned pull (sender loop). */
    void staleWave() {
        staleWaves.increment();
    }

    /** Waves not written because they could not start within the staleness bound (any thread). */
    long staleWaves() {
        return staleWaves.sum();
    }

    /** Counts a pull (or a write) refused because its destination is P's own engine (sender loop). */
    void selfAimedRefused() {
        selfAimedRefusals.increment();
    }

    /** Pulls (and writes) refused because their destination is P's own engine (any thread). */
    long selfAimedRefusals() {
        return selfAimedRefusals.sum();
    }
}
