package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.connector.worker.SideChannelLimits;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.plan.DescriptorBuffer;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.engine.TransferEngine;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state of P's send path that its parts share (each part extends the one before and holds the
 * state only it touches): the transfers to send, the active pulls, the descriptor buffer, the
 * configuration, and the classes that own a group of state each ({@link TransferPool},
 * {@link PoolShares}, {@link PendingLimits}, {@link PreparedShapes}, {@link RetriedPulls}). A pull
 * being served is a {@link Pull}; a transfer pushed layer by layer has a {@link Layerwise}. The parts: {@link LayerwisePush}
 * (writes layer by layer while the forward pass runs), {@link SendBookkeeping} ({@code record_send_reqs},
 * finished and expired holds), {@link KvSender} (the side channel and the waves). Every field is
 * sender-loop state unless its comment says otherwise; see {@link KvSender} for the threads.
 */
abstract class SenderState {


    static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    /** vLLM's timeout message, kept verbatim. */
    public static final String READY_TIMEOUT_MESSAGE = "Timeout waiting for P side ready.";
    /** The error of a request that expired (or was removed) between readiness and sending (§15 #1 fixed). */
    public static final String EXPIRED_BEFORE_SENDING = "Request expired before sending on P side.";
    /** The error of requests whose wave could not start before D may have given up. */
    static final String STALE_WAVE_MESSAGE = "P could not start the transfer within the abort timeout of its last "
            + "contact with D; nothing was written (D may have given up on these blocks).";
    /** {@link #sendBlocks}' result for a wave that was not written because it was stale. */
    static final int STALE = Integer.MIN_VALUE;
    /** {@link #sendBlocks}' result for a wave of a pull P abandoned (side channel reset, shutdown). */
    static final int ABANDONED = Integer.MIN_VALUE + 1;
    /** {@link #sendBlocks}' result for a write whose destination resolved to P's own engine (not written). */
    static final int SELF_AIMED = Integer.MIN_VALUE + 2;
    static final String ABANDONED_MESSAGE = "P abandoned this pull (its side channel was reset or it is shutting "
            + "down); nothing was written.";

    final String engineLabel;
    final TransferEngine engine;
    final MooncakeKvConnectorStats stats;
    final BackgroundErrors errors;
    final ScheduledExecutorService loop;
    /** The transfer threads (they own themselves). */
    final TransferPool xferPool;
    /** Each D's share of {@link #xferPool} (sender loop). */
    final PoolShares shares;
    final LongSupplier clock;
    final long abortNanos;
    final int localPpSize;
    final TransferPlanner planner;
    final List<TransferRegion> localRegions;
    final ToIntFunction<String> groupOfLayer;
    final Function<String, LayerLayout> layoutOfLayer;
    /** The region pairs prepared per shape of D (sender loop). */
    final PreparedShapes preparedShapes;

    // sender-loop state
    final Map<String, SendBlockMeta> reqsNeedSend = new LinkedHashMap<>();
    final DescriptorBuffer buf = new DescriptorBuffer(1024);
    final Set<Pull> activePulls = new HashSet<>();

    static final int MAX_DISTINCT_REJECTIONS = 256;
    final LongAdder placeholdersExpired = new LongAdder();
    final LongAdder staleWaves = new LongAdder();

    final SideChannelLimits limits;
    /** D requests served or answered lately, so that a re-sent pull is never written twice. */
    final RetriedPulls retried;
    /** What the pulls hold against the limits (sender loop). */
    final PendingLimits pendingLimits;

    /** Layer-wise push is on ({@code layerwise_push}); its state is {@link LayerwisePush}'s. */
    final boolean layerwise;

    /** {@code transferThreadNice}: see {@link TransferPool}. */
    SenderState(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits, boolean layerwise,
            int transferThreadNice) {
        this.layerwise = layerwise;
        this.engineLabel = engineLabel;
        this.limits = limits;
        this.retried = new RetriedPulls(abortNanos, limits.maxPendingTotal());
        this.pendingLimits = new PendingLimits(limits);
        this.engine = engine;
        this.stats = stats;
        this.errors = errors;
        this.loop = loop;
        this.clock = clock;
        this.abortNanos = abortNanos;
        this.localPpSize = localPpSize;
        this.planner = planner;
        this.localRegions = List.copyOf(localRegions);
        this.groupOfLayer = groupOfLayer;
        this.layoutOfLayer = layoutOfLayer;
        this.preparedShapes = new PreparedShapes(planner, this.localRegions, groupOfLayer, layoutOfLayer, localPpSize);
        this.xferPool = new TransferPool(engineLabel, numWorkers, transferThreadNice);
        this.shares = new PoolShares(xferPool, limits.transfersPerPeer(numWorkers));
    }


    // ------------------------------------------------------------------------------ across the parts

    /** Queues {@code pull}'s next wave on the sender loop ({@link KvSender}). */
    abstract void scheduleWave(Pull pull);

    /** vLLM's {@code _send_blocks} on a transfer-pool thread ({@link KvSender}). */
    abstract int sendBlocks(String session, long[] src, long[] dst, long[] len, long bytes);
}
