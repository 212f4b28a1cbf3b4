package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.wire.ProtocolException;
import io.mooncake4j.connector.worker.plan.DescriptorBuffer;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.PlanErrors;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.ReadyRequest;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.ThreadTuning;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.ToIntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The producer's send path (vLLM's {@code send_kv_to_decode}, {@code record_send_reqs},
 * {@code fetch_finished_sending_reqs} and {@code _send_blocks}, spec §6.7–§6.12), as a
 * {@link SideChannelHandler}.
 *
 * <p>Threads: every method except {@link #sendBlocks} runs on the sender loop
 * ({@code mooncake-p-sender-0}), which owns {@code reqs_need_send}, the finished set, the planner
 * and its buffers. Waiting for readiness never blocks that thread: each pulled transfer has a
 * {@code ready} future whose completion posts back to the loop, and each wave arms one scheduled
 * timeout of the abort timeout. A ready wave's descriptors go to the transfer pool
 * ({@code mooncake-p-xfer-<n>}, {@code num_workers} threads), which runs the blocking
 * {@code batchTransferSyncWrite}, answers D itself when the write succeeded (the answer was fixed
 * when the wave was planned; the {@link ReplySink} is thread-safe) and posts the result back to
 * the loop, which does the bookkeeping (and answers D for a failed write).
 *
 * <p><b>Bounds (issue 9).</b> A pull is refused with an {@code ERROR} response, before anything is
 * created for it, when it would make P hold more pending transfer ids (or metadata bytes) for its D
 * than {@link SideChannelLimits#maxPendingPerPeer()} allows, more over all peers than
 * {@link SideChannelLimits#maxPendingTotal()}, or more placeholders than that total. One D (keyed by
 * its {@code remote_hostname:remote_port}) occupies at most
 * {@link SideChannelLimits#transfersPerPeer} transfer-pool threads; its further waves wait on the
 * loop, so a D that stops reading cannot starve the others.
 *
 * <p><b>No write after abandonment.</b> A wave is written only if its transfer starts within the
 * abort timeout of P's last contact with D on that pull (the request's arrival or P's last response).
 * D's receive deadline is the abort timeout plus a margin (vLLM: 60 s) after the last response it
 * received, so a write that starts by then has that margin to finish before D may declare the load
 * failed. A wave that missed it is not written; its requests are reported in {@code err_reqs} with
 * {@link #STALE_WAVE_MESSAGE}.
 *
 * <p><b>Layer-wise push (issue 13).</b> With {@code layerwise_push}, a transfer whose prefill chunks
 * are named in the step's metadata is written layer by layer as {@link #onLayerSaved} reports each
 * layer (the rest of a chunk at {@link #onForwardDone}): to every D pull already there, and to a pull
 * that arrives later all saved layers at once. Each such write passes the same staleness check, the
 * same abandonment check and the same per-D pool share as a wave. The request joins a wave (and so
 * D's {@code FINISH}) only when its last chunk is saved and every write of it landed; the first
 * failed write stops its writes and fails it for D once (in {@code err_reqs}), when nothing of it is
 * in flight. D's side and the messages are unchanged.
 */
final class KvSender implements SideChannelHandler, SenderListener.Quiesce, AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    /** vLLM's timeout message, kept verbatim. */
    static final String READY_TIMEOUT_MESSAGE = "Timeout waiting for P side ready.";
    /** The error of a request that expired (or was removed) between readiness and sending (§15 #1 fixed). */
    static final String EXPIRED_BEFORE_SENDING = "Request expired before sending on P side.";
    /** The error of requests whose wave could not start before D may have given up (issue 9). */
    static final String STALE_WAVE_MESSAGE = "P could not start the transfer within the abort timeout of its last "
            + "contact with D; nothing was written (D may have given up on these blocks).";
    /** {@link #sendBlocks}' result for a wave that was not written because it was stale. */
    private static final int STALE = Integer.MIN_VALUE;
    /** {@link #sendBlocks}' result for a wave of a pull P abandoned (side channel reset, shutdown). */
    private static final int ABANDONED = Integer.MIN_VALUE + 1;
    static final String ABANDONED_MESSAGE = "P abandoned this pull (its side channel was reset or it is shutting "
            + "down); nothing was written.";

    private final String engineLabel;
    private final TransferEngine engine;
    private final MooncakeKvConnectorStats stats;
    private final BackgroundErrors errors;
    private final ScheduledExecutorService loop;
    private final ExecutorService xferPool;
    private final LongSupplier clock;
    private final long abortNanos;
    private final int localPpSize;
    private final TransferPlanner planner;
    private final TransferTopology topology;
    private final List<TransferRegion> localRegions;
    private final ToIntFunction<String> groupOfLayer;
    private final Function<String, LayerLayout> layoutOfLayer;

    // sender-loop state
    private final Map<String, SendBlockMeta> reqsNeedSend = new LinkedHashMap<>();
    private Set<String> finishedSendingReqs = new LinkedHashSet<>();
    /** Run on the sender loop after {@code finishedSendingReqs} gained an id or a hold expired; never throws. */
    private volatile Runnable onFinished = () -> { };
    /** The armed expiry wake-up ({@link #armExpiryWake}) and its deadline on {@code clock} (sender loop). */
    private ScheduledFuture<?> expiryWake;
    private long expiryWakeAt;
    /** Expiry deadlines of the recorded holds ({@code request_finished} + abort timeout), earliest first. */
    private final ExpiryQueue<SendBlockMeta> holdExpiry = new ExpiryQueue<>(
            (sm, at) -> reqsNeedSend.get(sm.transferId) == sm && !sm.isPlaceholder() && sm.expireNanos == at);
    /** Expiry deadlines of the placeholders of early D pulls (creation + abort timeout), earliest first. */
    private final ExpiryQueue<SendBlockMeta> placeholderExpiry = new ExpiryQueue<>(
            (sm, at) -> reqsNeedSend.get(sm.transferId) == sm && sm.isPlaceholder());
    private final DescriptorBuffer buf = new DescriptorBuffer(1024);
    private final PlanErrors planErrors = new PlanErrors();
    private final Set<Pull> activePulls = new HashSet<>();

    private static final int MAX_DISTINCT_REJECTIONS = 256;
    private final Set<String> rejectedLogged = new HashSet<>(); // sender loop only
    private final LongAdder errorReplies = new LongAdder();
    private final LongAdder placeholdersExpired = new LongAdder();
    private final LongAdder limitRejections = new LongAdder();
    private final LongAdder staleWaves = new LongAdder();
    private final LongAdder wavesQueuedForShare = new LongAdder();
    /** Transfer-pool jobs between their abandonment check and the end of their write. */
    private final AtomicInteger writing = new AtomicInteger();

    private final SideChannelLimits limits;
    private final int perPeerShare;
    private final long maxBytesPerPeer;
    private final long maxBytesTotal;
    // sender-loop state of the limits
    private final Map<String, long[]> pendingByPeer = new HashMap<>(); // peer -> {transfer ids, metadata bytes}
    private long pendingTotal;
    private long pendingBytesTotal;
    private int placeholders;
    private final Map<String, Integer> inFlightByPeer = new HashMap<>();
    private final Map<String, ArrayDeque<Runnable>> queuedByPeer = new HashMap<>();

    // layer-wise push (sender-loop state)
    private final boolean layerwise;
    /** The distinct registered layer names, in registration order: a chunk is saved when all of them are. */
    private final List<String> layerNames;
    private final Set<String> layerNameSet;
    /** The chunks of the current forward pass (from the step's metadata), until {@link #onForwardDone}. */
    private List<Segment> stepSegments = new ArrayList<>();
    private final Set<String> unknownLayersLogged = new HashSet<>();
    private final LongAdder layerJobs = new LongAdder();
    private final LongAdder coalescedLayers = new LongAdder();
    /** The model runner's tasks ({@link #offerFromModelRunner}) not run yet, in call order. */
    private final java.util.concurrent.ConcurrentLinkedQueue<Runnable> layerHooks =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    /** A task that runs {@link #layerHooks} is queued on the sender loop and has not started. */
    private final java.util.concurrent.atomic.AtomicBoolean hookDrainQueued =
            new java.util.concurrent.atomic.AtomicBoolean();
    /** Layer-wise writes submitted whose result the sender loop has not handled (loop writes, any thread reads). */
    private final AtomicInteger layerWritesInFlight = new AtomicInteger();
    /** Every live layer-wise target has a write in flight (sender loop writes; a hint for {@link #offerFromModelRunner}). */
    private volatile boolean everyTargetWriting;
    private final LongAdder hookWakeups = new LongAdder();
    private final java.util.concurrent.atomic.AtomicBoolean niceRefusedLogged =
            new java.util.concurrent.atomic.AtomicBoolean();

    KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits) {
        this(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, false);
    }

    KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits, boolean layerwise) {
        this(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, layerwise, 0);
    }

    /**
     * As above; {@code transferThreadNice > 0} makes each transfer thread set that nice value when it
     * starts (and so the engine threads it starts: Linux threads inherit it), warned once where the
     * system refuses.
     */
    KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits, boolean layerwise,
            int transferThreadNice) {
        this.layerwise = layerwise;
        LinkedHashSet<String> names = new LinkedHashSet<>();
        for (TransferRegion r : localRegions) {
            names.add(r.layerName());
        }
        this.layerNames = List.copyOf(names);
        this.layerNameSet = Set.copyOf(names);
        this.engineLabel = engineLabel;
        this.limits = limits;
        this.perPeerShare = limits.transfersPerPeer(numWorkers);
        this.maxBytesPerPeer = 4 * limits.maxMetadataBytes();
        this.maxBytesTotal = 16 * limits.maxMetadataBytes();
        this.engine = engine;
        this.stats = stats;
        this.errors = errors;
        this.loop = loop;
        this.clock = clock;
        this.abortNanos = abortNanos;
        this.localPpSize = localPpSize;
        this.planner = planner;
        this.topology = planner.topology();
        this.localRegions = List.copyOf(localRegions);
        this.groupOfLayer = groupOfLayer;
        this.layoutOfLayer = layoutOfLayer;
        AtomicInteger n = new AtomicInteger();
        this.xferPool = new ThreadPoolExecutor(numWorkers, numWorkers, 0, TimeUnit.MILLISECONDS,
                new LinkedBlockingQueue<>(), r -> {
                    Runnable body = transferThreadNice == 0 ? r : () -> {
                        if (!ThreadTuning.setNice(transferThreadNice) && !niceRefusedLogged.getAndSet(true)) {
                            LOG.warn("{}: transfer_thread_nice {}: the system refused to set it (not Linux, or no "
                                    + "native access); P's transfer threads keep their priority", engineLabel,
                                    transferThreadNice);
                        }
                        r.run();
                    };
                    Thread t = new Thread(body, "mooncake-p-xfer-" + n.getAndIncrement());
                    t.setDaemon(true);
                    return t;
                });
    }

    /** One D pull (one side-channel message) being served: vLLM's locals of {@code send_kv_to_decode}. */
    private final class Pull {
        final byte[] identity;
        final ReplySink reply;
        final MooncakeXferMetadata meta;
        final PreparedRegions regions;
        final Prepared prepared;
        final int pairedRemoteRanks;
        final Map<String, SendBlockMeta> pending = new LinkedHashMap<>();
        final Map<String, int[][]> remoteBlocks = new LinkedHashMap<>();
        final Set<String> readyNow = new LinkedHashSet<>();
        final String peer;
        final long bytes;
        /** When P last heard from or answered D on this pull (P's clock); the staleness rule counts from it. */
        long lastContact;
        ScheduledFuture<?> timeout;
        boolean busy;
        boolean waveScheduled;
        // read by the transfer pool before it writes: a wave of an ended pull is never written
        volatile boolean done;
        /** Layer-wise push: D request id → its layer-wise progress (requests pushed whole have none). */
        final Map<String, Target> lwTargets = new HashMap<>();
        /** Layer-wise writes of this pull on the pool or queued for its share. */
        int lwInflight;

        Pull(byte[] identity, ReplySink reply, MooncakeXferMetadata meta, Prepared prepared, int paired,
                String peer, long bytes) {
            this.peer = peer;
            this.bytes = bytes;
            this.identity = identity;
            this.reply = reply;
            this.meta = meta;
            this.prepared = prepared;
            this.regions = prepared.regions;
            this.pairedRemoteRanks = paired;
        }
    }

    /**
     * The region pairs prepared for one shape of D (its registration as its pull describes it, its
     * ranks): a pure function of that shape and of this worker's fixed registration, so pulls of the
     * same D share them (issue 13: preparing took a few hundred µs per pull). Immutable once built,
     * except {@link #byLayer}, built on first use (sender loop).
     */
    private static final class Prepared {
        final PreparedRegions regions;
        /** The prepared region pairs of each local layer (layer-wise push), built on first use. */
        Map<String, PreparedRegions> byLayer;

        Prepared(PreparedRegions regions) {
            this.regions = regions;
        }
    }

    /** What the prepared regions depend on in a pull's metadata (arrays compared by content). */
    private record ShapeKey(int tpRank, int tpSize, int ppSize, long[] base, long[] blockLens, long[] kvBlockLens,
            List<String> names, int[] layerIndices, int[] groupIndices) {

        static ShapeKey of(MooncakeXferMetadata m) {
            return new ShapeKey(m.remoteTpRank(), m.remoteTpSize(), m.remotePpSize(), m.kvCachesBaseAddr(),
                    m.blockLens(), m.kvBlockLens(), m.registeredLayerNames(), m.registeredLayerIndices(),
                    m.registeredGroupIndices());
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ShapeKey k && tpRank == k.tpRank && tpSize == k.tpSize && ppSize == k.ppSize
                    && Arrays.equals(base, k.base) && Arrays.equals(blockLens, k.blockLens)
                    && Arrays.equals(kvBlockLens, k.kvBlockLens) && names.equals(k.names)
                    && Arrays.equals(layerIndices, k.layerIndices) && Arrays.equals(groupIndices, k.groupIndices);
        }

        @Override
        public int hashCode() {
            int h = ((tpRank * 31 + tpSize) * 31 + ppSize) * 31 + Arrays.hashCode(base);
            h = h * 31 + Arrays.hashCode(blockLens);
            h = h * 31 + Arrays.hashCode(kvBlockLens);
            h = h * 31 + names.hashCode();
            h = h * 31 + Arrays.hashCode(layerIndices);
            return h * 31 + Arrays.hashCode(groupIndices);
        }
    }

    /** Shapes kept (least recently used dropped first): a few per D worker is the usual need. */
    static final int MAX_PREPARED_SHAPES = 64;

    // sender loop only
    private final LinkedHashMap<ShapeKey, Prepared> preparedByShape = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<ShapeKey, Prepared> eldest) {
            return size() > MAX_PREPARED_SHAPES;
        }
    };

    /** The region pairs for a pull of this shape, prepared once per shape (sender loop). */
    private Prepared prepared(MooncakeXferMetadata meta) {
        ShapeKey key = ShapeKey.of(meta);
        Prepared p = preparedByShape.get(key);
        if (p == null) {
            List<TransferRegion> remote = planner.regions(meta.kvCachesBaseAddr(), meta.blockLens(),
                    meta.kvBlockLens(), meta.registeredLayerNames(), meta.registeredLayerIndices(),
                    meta.registeredGroupIndices(), groupOfLayer);
            p = new Prepared(planner.prepare(localRegions, remote, meta.remoteTpRank(), meta.remoteTpSize(),
                    TransferPlanner.allowPartialLayers(meta.remotePpSize(), localPpSize), layoutOfLayer));
            preparedByShape.put(key, p);
        }
        return p;
    }

    /** A ready request of a wave, as the planner sees it. */
    private record Ready(String dReqId, SendBlockMeta sendMeta, int[][] remoteBlockIds) implements ReadyRequest {
        @Override
        public int[][] localBlockIds() {
            return sendMeta.localBlockIds;
        }
    }

    // ------------------------------------------------------------------------------ side channel

    @Override
    public void onMessage(byte[] identity, List<byte[]> frames, ReplySink reply) {
        WaveTrace.mark(WaveTrace.Point.P_HANDLER);
        try {
            if (frames.size() != 1) {
                throw new ProtocolException(String.format(Locale.ROOT,
                        "Malformed Mooncake side-channel message: %d payload frame(s), expected 1", frames.size()));
            }
            MooncakeXferMetadata meta = MooncakeXferMetadataCodec.decode(frames.getFirst());
            sendKvToDecode(identity, reply, meta, frames.getFirst().length);
        } catch (ProtocolException | TransferPlanningException | ArithmeticException e) {
            logRejected(e.getMessage());
            replyError(reply, e.getMessage());
        } catch (RuntimeException e) {
            errors.report("sender loop", e);
            replyError(reply, "Error processing Mooncake xfer request: " + e);
        }
    }

    /** Logs a rejected message at ERROR once per distinct text (a hostile peer cannot flood the log), then at DEBUG. */
    private void logRejected(String msg) {
        if (rejectedLogged.size() < MAX_DISTINCT_REJECTIONS && rejectedLogged.add(String.valueOf(msg))) {
            LOG.error("Error processing Mooncake xfer request: {} (repeats are logged at DEBUG)", msg);
        } else {
            LOG.debug("Error processing Mooncake xfer request: {}", msg);
        }
    }

    private void replyError(ReplySink reply, String msg) {
        errorReplies.increment();
        send(reply, MooncakeXferResponse.error(msg));
    }

    private static void send(ReplySink reply, MooncakeXferResponse resp) {
        reply.send(MooncakeXferResponseCodec.encode(resp));
    }

    /** The limit a new pull would exceed, or null (sender loop). */
    private String limitError(String peer, MooncakeXferMetadata meta, long bytes) {
        int n = meta.reqBlocks().size();
        long[] mine = pendingByPeer.getOrDefault(peer, new long[2]);
        if (mine[0] + n > limits.maxPendingPerPeer()) {
            return String.format(Locale.ROOT, "P side-channel limit: D %s has %d transfer(s) pending at P and this "
                    + "pull names %d more, above the per-peer limit of %d; retry later", peer, mine[0], n,
                    limits.maxPendingPerPeer());
        }
        if (pendingTotal + n > limits.maxPendingTotal()) {
            return String.format(Locale.ROOT, "P side-channel limit: %d transfer(s) pending at P and this pull names "
                    + "%d more, above the limit of %d; retry later", pendingTotal, n, limits.maxPendingTotal());
        }
        if (mine[1] + bytes > maxBytesPerPeer || pendingBytesTotal + bytes > maxBytesTotal) {
            return String.format(Locale.ROOT, "P side-channel limit: pending pulls hold %d bytes of metadata for D %s "
                    + "(%d in all); this pull of %d bytes is above the limit of %d per peer, %d in all; retry later",
                    mine[1], peer, pendingBytesTotal, bytes, maxBytesPerPeer, maxBytesTotal);
        }
        int fresh = 0;
        Set<String> seen = new HashSet<>();
        for (MooncakeXferMetadata.ReqBlocks rb : meta.reqBlocks().values()) {
            if (!reqsNeedSend.containsKey(rb.transferId()) && seen.add(rb.transferId())) {
                fresh++;
            }
        }
        if (placeholders + fresh > limits.maxPendingTotal()) {
            return String.format(Locale.ROOT, "P side-channel limit: P holds %d placeholder(s) for transfers it has "
                    + "not scheduled and this pull names %d more, above the limit of %d; retry later", placeholders,
                    fresh, limits.maxPendingTotal());
        }
        return null;
    }

    /** Counts a new pull's pending transfer ids and metadata bytes against the limits (sender loop). */
    private void pend(Pull pull) {
        long[] mine = pendingByPeer.computeIfAbsent(pull.peer, k -> new long[2]);
        mine[0] += pull.pending.size();
        mine[1] += pull.bytes;
        pendingTotal += pull.pending.size();
        pendingBytesTotal += pull.bytes;
    }

    /** {@code n} pending transfer ids of {@code pull} are no longer waited for. */
    private void unpend(Pull pull, int n) {
        long[] mine = pendingByPeer.get(pull.peer);
        if (mine != null) {
            mine[0] -= n;
            pendingTotal -= n;
        }
    }

    /** The pull ended: what is left of it no longer counts. */
    private void unpendAll(Pull pull) {
        unpend(pull, pull.pending.size());
        long[] mine = pendingByPeer.get(pull.peer);
        if (mine != null) {
            mine[1] -= pull.bytes;
            pendingBytesTotal -= pull.bytes;
            if (mine[0] <= 0 && mine[1] <= 0) {
                pendingByPeer.remove(pull.peer);
            }
        }
    }

    private void sendKvToDecode(byte[] identity, ReplySink reply, MooncakeXferMetadata meta, long bytes) {
        String peer = meta.remoteHostname() + ":" + meta.remotePort();
        String limit = limitError(peer, meta, bytes);
        if (limit != null) {
            limitRejections.increment();
            logRejected("P side-channel limit exceeded (pending transfers, placeholders or metadata bytes); "
                    + "the pull got an ERROR response");
            LOG.debug("{}", limit);
            replyError(reply, limit);
            return;
        }
        String pairing = topology.pairingError(meta.remoteTpRank(), meta.remoteTpSize());
        if (pairing != null) {
            logRejected(pairing);
            replyError(reply, pairing);
            return;
        }
        Prepared cached = prepared(meta);
        PreparedRegions prepared = cached.regions;
        WaveTrace.mark(WaveTrace.Point.P_PREPARED);
        if (!prepared.ok()) {
            logRejected(prepared.error());
            replyError(reply, prepared.error());
            return;
        }
        int paired = topology.handshakeTargetRanks(meta.remoteTpSize()).length;
        Pull pull = new Pull(identity, reply, meta, cached, paired, peer, bytes);
        long now = clock.getAsLong();
        pull.lastContact = now;
        for (Map.Entry<String, MooncakeXferMetadata.ReqBlocks> e : meta.reqBlocks().entrySet()) {
            pull.remoteBlocks.put(e.getKey(), toInts(e.getValue().blockIds()));
        }
        for (Map.Entry<String, MooncakeXferMetadata.ReqBlocks> e : meta.reqBlocks().entrySet()) {
            String transferId = e.getValue().transferId();
            SendBlockMeta sm = reqsNeedSend.get(transferId);
            if (sm == null) { // D arrived before P's scheduler
                sm = new SendBlockMeta("", transferId, new int[0][], now);
                reqsNeedSend.put(transferId, sm);
                placeholders++;
                placeholderExpiry.add(now + abortNanos, sm, reqsNeedSend.size());
            }
            if (pull.pending.put(e.getKey(), sm) == null) {
                sm.waiters++;
            }
        }

        if (pull.pending.isEmpty()) {
            send(reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, null, null));
            return;
        }
        activePulls.add(pull);
        pend(pull);
        if (layerwise) {
            for (Map.Entry<String, SendBlockMeta> e : pull.pending.entrySet()) {
                if (e.getValue().layerwise != null) {
                    addTarget(pull, e.getKey(), e.getValue());
                }
            }
        }
        for (Map.Entry<String, SendBlockMeta> e : pull.pending.entrySet()) {
            String dReqId = e.getKey();
            e.getValue().ready.thenRunAsync(() -> onReady(pull, dReqId), loop)
                    .exceptionally(t -> {
                        if (!(t.getCause() instanceof RejectedExecutionException)) {
                            errors.report("sender loop", t);
                        }
                        return null;
                    });
        }
        armTimeout(pull);
    }

    private static int[][] toInts(long[][] ids) {
        int[][] out = new int[ids.length][];
        for (int g = 0; g < ids.length; g++) {
            long[] src = ids[g];
            int[] dst = new int[src.length];
            for (int i = 0; i < src.length; i++) {
                dst[i] = Math.toIntExact(src[i]);
            }
            out[g] = dst;
        }
        return out;
    }

    private void armTimeout(Pull pull) {
        pull.timeout = loop.schedule(errors.guarded("sender loop", () -> onTimeout(pull)), abortNanos,
                TimeUnit.NANOSECONDS);
    }

    private void onReady(Pull pull, String dReqId) {
        if (pull.done || !pull.pending.containsKey(dReqId) || pull.lwTargets.containsKey(dReqId)) {
            return; // a layer-wise request is ready when its last layer landed (checkLanded)
        }
        pull.readyNow.add(dReqId);
        scheduleWave(pull);
    }

    private void scheduleWave(Pull pull) {
        if (!pull.waveScheduled && !pull.busy) {
            pull.waveScheduled = true;
            loop.execute(errors.guarded("sender loop", () -> {
                pull.waveScheduled = false;
                processWave(pull);
            }));
        }
    }

    private void onTimeout(Pull pull) {
        if (pull.done || pull.busy || !pull.readyNow.isEmpty()) {
            return; // a wave is due; it re-arms the timeout
        }
        if (pull.lwInflight > 0) {
            armTimeout(pull); // answer only once no layer-wise write of this pull is running
            return;
        }
        List<String> ids = new ArrayList<>(pull.pending.keySet());
        LOG.warn("Timeout waiting for P side ready: {}", ids);
        send(pull.reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, ids, READY_TIMEOUT_MESSAGE));
        end(pull);
    }

    private void end(Pull pull) {
        pull.done = true;
        for (Target t : pull.lwTargets.values()) {
            if (t.sm.layerwise != null) {
                t.sm.layerwise.targets.remove(t);
            }
        }
        if (pull.timeout != null) {
            pull.timeout.cancel(false);
        }
        for (SendBlockMeta sm : pull.pending.values()) {
            sm.waiters--;
        }
        if (activePulls.contains(pull)) {
            unpendAll(pull);
        }
        pull.pending.clear();
        pull.readyNow.clear();
        activePulls.remove(pull);
    }

    private void processWave(Pull pull) {
        if (pull.done || pull.busy || pull.readyNow.isEmpty()) {
            return;
        }
        if (pull.timeout != null) {
            pull.timeout.cancel(false);
            pull.timeout = null;
        }
        List<Ready> ready = new ArrayList<>(pull.readyNow.size());
        List<String> errReqs = new ArrayList<>();
        List<Ready> lwDone = new ArrayList<>(); // layer-wise: already written (or failed), nothing to plan
        String errMsg = null;
        for (String dReqId : pull.readyNow) {
            SendBlockMeta sm = pull.pending.remove(dReqId);
            sm.waiters--;
            unpend(pull, 1);
            if (reqsNeedSend.get(sm.transferId) == sm) {
                sm.sending++; // blocks expiry
                if (sm.needSend == 0) {
                    sm.needSend = TransferTopology.resolveNeedSend(pull.pairedRemoteRanks, pull.meta.remotePpSize(),
                            localPpSize);
                    LOG.debug("need_send of {} resolved to {}", sm.transferId, sm.needSend);
                }
                Target t = pull.lwTargets.get(dReqId);
                if (t == null) {
                    ready.add(new Ready(dReqId, sm, pull.remoteBlocks.get(dReqId)));
                } else {
                    lwDone.add(new Ready(dReqId, sm, pull.remoteBlocks.get(dReqId)));
                    if (t.failed != null) {
                        errReqs.add(dReqId);
                        errMsg = errMsg == null ? t.failed : errMsg;
                    }
                }
            } else {
                LOG.warn("Request {} expired before sending on P side.", dReqId);
                errReqs.add(dReqId);
                errMsg = errMsg == null ? EXPIRED_BEFORE_SENDING : errMsg;
            }
        }
        pull.readyNow.clear();
        MooncakeXferResponseStatus status = pull.pending.isEmpty()
                ? MooncakeXferResponseStatus.FINISH : MooncakeXferResponseStatus.CONTINUE;
        buf.clear();
        planErrors.clear();
        try {
            planner.plan(ready, pull.regions, buf, planErrors);
        } catch (TransferPlanningException | IllegalArgumentException | IllegalStateException e) {
            buf.clear();
            for (Ready r : ready) {
                r.sendMeta.sending--;
            }
            for (Ready r : lwDone) {
                r.sendMeta.sending--;
            }
            LOG.error("Error processing Mooncake xfer request: {}", e.getMessage());
            replyError(pull.reply, e.getMessage());
            end(pull);
            return;
        }
        errReqs.addAll(planErrors.errReqs());
        if (errMsg == null) {
            errMsg = planErrors.errMsg();
        }
        ready.addAll(lwDone);
        if (buf.isEmpty()) {
            finishWave(pull, ready, errReqs, errMsg, status, 0, NOT_ANSWERED);
            return;
        }
        String session = pull.meta.remoteHostname() + ":" + pull.meta.remotePort();
        long[] src = buf.copySrc();
        long[] dst = buf.copyDst();
        long[] len = buf.copyLen();
        long bytes = buf.totalBytes();
        buf.clear();
        pull.busy = true;
        String wErrMsg = errMsg;
        if (LOG.isDebugEnabled()) {
            LOG.debug("Sending kv_caches for {} request(s) ({} descriptors, {} bytes) to {}", ready.size(), src.length,
                    bytes, session);
        }
        long contact = pull.lastContact;
        String peer = pull.peer;
        Runnable job = () -> {
            int ret;
            writing.incrementAndGet(); // before the check: abandonAllPulls' waiter sees this write
            try {
                if (pull.done) {
                    ret = ABANDONED;
                } else if (clock.getAsLong() - contact - abortNanos > 0) {
                    ret = STALE; // D may have given up: its blocks may belong to another request by now
                } else {
                    ret = sendBlocks(session, src, dst, len, bytes);
                }
            } finally {
                writing.decrementAndGet();
            }
            // Every byte landed: D's answer is known already (it depends on the wave alone), so it goes
            // from here, before the hand-off of the bookkeeping to the loop (issue 13; waking the loop
            // first lets it take this thread's core). A pull D sends after reading the answer may then
            // reach the loop before that bookkeeping: it pairs with other transfers, and the counters
            // it meets (pending ids, pool share) are at most this wave's higher, for that moment.
            long answeredAt = NOT_ANSWERED;
            if (ret == 0 && !loop.isShutdown()) {
                byte[] answer = MooncakeXferResponseCodec.encode(answer(ready, errReqs, wErrMsg, status));
                answeredAt = clock.getAsLong(); // not after the answer leaves: the staleness rule counts from it
                WaveTrace.mark(WaveTrace.Point.P_REPLY_QUEUED);
                pull.reply.send(answer);
            }
            long answered = answeredAt;
            try {
                loop.execute(errors.guarded("sender loop", () -> {
                    releaseShare(peer);
                    finishWave(pull, ready, errReqs, wErrMsg, status, ret, answered);
                }));
            } catch (RejectedExecutionException e) {
                LOG.debug("sender loop stopped; dropping the result of a transfer to {}", session);
            }
        };
        int inFlight = inFlightByPeer.getOrDefault(peer, 0);
        if (inFlight >= perPeerShare) {
            wavesQueuedForShare.increment();
            LOG.debug("D {} already has {} transfer(s) on the pool (its share); queueing a wave", peer, inFlight);
            queuedByPeer.computeIfAbsent(peer, k -> new ArrayDeque<>()).addLast(job);
            return;
        }
        inFlightByPeer.put(peer, inFlight + 1);
        WaveTrace.mark(WaveTrace.Point.P_WAVE_SUBMIT);
        submit(peer, job, () -> finishWave(pull, ready, errReqs, wErrMsg, status, -1, NOT_ANSWERED));
    }

    private void submit(String peer, Runnable job, Runnable onRejected) {
        try {
            xferPool.execute(job);
        } catch (RejectedExecutionException e) {
            releaseShare(peer);
            onRejected.run();
        }
    }

    /** A transfer of {@code peer} left the pool (sender loop): its next queued wave, if any, takes the slot. */
    private void releaseShare(String peer) {
        ArrayDeque<Runnable> q = queuedByPeer.get(peer);
        Runnable next = q == null ? null : q.pollFirst();
        if (q != null && q.isEmpty()) {
            queuedByPeer.remove(peer);
        }
        if (next == null) {
            int n = inFlightByPeer.getOrDefault(peer, 1) - 1;
            if (n <= 0) {
                inFlightByPeer.remove(peer);
            } else {
                inFlightByPeer.put(peer, n);
            }
            return;
        }
        try {
            xferPool.execute(next); // the slot passes on
        } catch (RejectedExecutionException e) {
            LOG.debug("transfer pool stopped; dropping a queued wave to {}", peer);
        }
    }

    /** vLLM's {@code _send_blocks}, on a transfer-pool thread. No retry. */
    private int sendBlocks(String session, long[] src, long[] dst, long[] len, long bytes) {
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

    /** D's answer to a wave whose write succeeded (any thread: reads only the wave's own lists). */
    private static MooncakeXferResponse answer(List<Ready> ready, List<String> errReqs, String errMsg,
            MooncakeXferResponseStatus status) {
        Set<String> errSet = new HashSet<>(errReqs);
        List<String> ok = new ArrayList<>(ready.size());
        for (Ready r : ready) {
            if (!errSet.contains(r.dReqId)) {
                ok.add(r.dReqId);
            }
        }
        return MooncakeXferResponse.of(status, ok, errReqs, errMsg);
    }

    /** {@link #finishWave}'s {@code answeredAt} when D has not been answered yet. */
    private static final long NOT_ANSWERED = Long.MIN_VALUE;

    /**
     * A wave ended (sender loop): its bookkeeping, and D's answer unless the transfer thread sent
     * it already (then {@code answeredAt} is P's clock just before it did: the write succeeded and
     * the answer is the one this method would send), else {@link #NOT_ANSWERED}.
     */
    private void finishWave(Pull pull, List<Ready> ready, List<String> errReqs, String errMsg,
            MooncakeXferResponseStatus status, int ret, long answeredAt) {
        pull.busy = false;
        Set<String> errSet = new HashSet<>(errReqs);
        List<String> ok = new ArrayList<>(ready.size());
        for (Ready r : ready) {
            if (!errSet.contains(r.dReqId)) {
                ok.add(r.dReqId);
            }
        }
        if (ret == STALE || ret == ABANDONED) {
            staleWaves.increment();
            String why = ret == STALE ? STALE_WAVE_MESSAGE : ABANDONED_MESSAGE;
            LOG.warn("Not writing {} request(s) to D {}: {}", ok.size(), pull.peer, why);
            errMsg = errMsg == null ? why : errMsg + "; " + why;
            errReqs.addAll(ok);
            errSet.addAll(ok);
            ok.clear();
        } else if (ret != 0) {
            String t = "Mooncake transfer engine returned " + ret;
            errMsg = errMsg == null ? t : errMsg + "; " + t;
            errReqs.addAll(ok);
            errSet.addAll(ok);
            ok.clear();
        }
        for (Ready r : ready) {
            SendBlockMeta sm = r.sendMeta;
            sm.sending--;
            if (errSet.contains(r.dReqId)) {
                continue; // failed pulls do not count; P keeps the blocks until expiry
            }
            sm.sent++;
            if (sm.sent == sm.needSend && sm.layerwise != null && !sm.ready.isDone()) {
                sm.sentEarly = true; // landed before request_finished: reported when it comes
            } else if (sm.sent == sm.needSend && reqsNeedSend.remove(sm.transferId, sm)) {
                markFinishedSending(sm.pReqId);
            }
        }
        if (answeredAt == NOT_ANSWERED) {
            WaveTrace.mark(WaveTrace.Point.P_REPLY_QUEUED);
            send(pull.reply, MooncakeXferResponse.of(status, ok, errReqs, errMsg));
            pull.lastContact = clock.getAsLong();
        } else {
            pull.lastContact = answeredAt;
        }
        if (status == MooncakeXferResponseStatus.FINISH || pull.done) {
            end(pull);
        } else if (!pull.readyNow.isEmpty()) {
            scheduleWave(pull);
        } else {
            armTimeout(pull);
        }
    }

    // ------------------------------------------------------------------------------ layer-wise push

    /** Layer-wise state of one transfer ({@link SendBlockMeta#layerwise}); sender loop only. */
    static final class Layerwise {
        final List<Segment> segments = new ArrayList<>();
        /** Saved (chunk, layers) pairs in save order; every target writes them in this order. */
        final List<Event> events = new ArrayList<>();
        final List<Target> targets = new ArrayList<>();
        /** The last chunk has every layer saved: nothing more will be written for this transfer. */
        boolean allSaved;
    }

    /** One prefill chunk of a transfer: prompt blocks {@code [first, first + local[g].length)} of {@code total}. */
    private static final class Segment {
        final SendBlockMeta sm;
        final int[][] local;
        final int first;
        final int total;
        final boolean last;
        final Set<String> saved = new HashSet<>();
        boolean complete;

        Segment(SendBlockMeta sm, int[][] local, int first, int total, boolean last) {
            this.sm = sm;
            this.local = local;
            this.first = first;
            this.total = total;
            this.last = last;
        }
    }

    private record Event(Segment segment, List<String> layers) {}

    /** One D request of one pull that is pushed layer by layer. */
    private static final class Target {
        final Pull pull;
        final String dReqId;
        final SendBlockMeta sm;
        final int[][] remote;
        /** Events of {@link Layerwise#events} submitted so far. */
        int cursor;
        int inflight;
        /** The first failure, reported to D once; nothing more is written for this request. */
        String failed;
        boolean landed;

        Target(Pull pull, String dReqId, SendBlockMeta sm, int[][] remote) {
            this.pull = pull;
            this.dReqId = dReqId;
            this.sm = sm;
            this.remote = remote;
        }
    }

    /**
     * Hands a task of the model runner's thread to the sender loop: a layer hook ({@code
     * saveKvLayer} / {@code waitForSave}, {@code mustWake} false) or the step's metadata ({@link
     * #recordSendReqs}, true). All of them run on the loop in call order, through one queue. The
     * loop is woken for a hook only when nothing else would run it soon: while every layer-wise
     * target has a write in flight, the first write's result runs the queue (a layer saved then
     * would wait for that write anyway), and a run of the queue already handed to the loop takes
     * everything added before it starts. So a forward pass whose transfer lags hands the loop one
     * task per write instead of one per layer; the layers saved meanwhile go in the next write as
     * before. {@link #fetchFinishedSending} runs the queue first (the model runner's earlier calls).
     */
    void offerFromModelRunner(Runnable task, boolean mustWake) {
        layerHooks.add(task);
        // the count is read after the add: a write counted here decrements it on the loop, then runs the queue
        if (!mustWake && everyTargetWriting && layerWritesInFlight.get() > 0) {
            return;
        }
        if (hookDrainQueued.compareAndSet(false, true)) {
            hookWakeups.increment();
            try {
                loop.execute(errors.guarded("sender loop", () -> {
                    hookDrainQueued.set(false); // a task added from now on is taken by this run or queues another
                    runLayerHooks();
                }));
            } catch (RejectedExecutionException e) {
                hookDrainQueued.set(false);
                throw e;
            }
        }
    }

    /** Runs the model runner's queued tasks in call order (sender loop). */
    private void runLayerHooks() {
        for (Runnable h = layerHooks.poll(); h != null; h = layerHooks.poll()) {
            h.run(); // each is guarded by the worker: one failing does not drop the rest
        }
    }

    /** Tasks handed to the sender loop to run the model runner's queue (diagnostics and tests). */
    long layerHookWakeups() {
        return hookWakeups.sum();
    }

    /** Sender loop: whether every live layer-wise target has a write in flight (see {@link #offerFromModelRunner}). */
    private void refreshHookHint() {
        boolean any = false;
        boolean all = true;
        for (Pull pull : activePulls) {
            for (Target t : pull.lwTargets.values()) {
                if (!t.landed && t.failed == null && !pull.done) {
                    any = true;
                    all &= t.inflight > 0;
                }
            }
        }
        everyTargetWriting = any && all;
    }

    /**
     * The step's metadata named the prefill chunks this forward pass saves (sender loop, before the
     * step's {@link #onLayerSaved} calls). Chunks of the previous step that were never closed by
     * {@link #onForwardDone} are closed first (their missing layers are pushed whole).
     */
    void recordLayerwiseChunks(Map<String, MooncakeConnectorMetadata.LayerwiseChunk> chunks) {
        if (!layerwise) {
            return;
        }
        onForwardDone();
        for (Map.Entry<String, MooncakeConnectorMetadata.LayerwiseChunk> e : chunks.entrySet()) {
            MooncakeConnectorMetadata.LayerwiseChunk c = e.getValue();
            SendBlockMeta sm = reqsNeedSend.get(c.transferId());
            if (sm == null || sm.isPlaceholder() || sm.ready.isDone()) {
                LOG.debug("layer-wise chunk of {} (transfer {}) ignored: not a pending send of a live P request",
                        e.getKey(), c.transferId());
                continue;
            }
            Layerwise lw = sm.layerwise;
            if (lw == null) {
                lw = new Layerwise();
                sm.layerwise = lw;
                for (Pull pull : activePulls) { // D pulled before P started the prefill
                    for (Map.Entry<String, SendBlockMeta> pe : pull.pending.entrySet()) {
                        if (pe.getValue() == sm) {
                            addTarget(pull, pe.getKey(), sm);
                        }
                    }
                }
            } else if (lw.allSaved) {
                LOG.debug("layer-wise chunk of {} after its last chunk; ignored", e.getKey());
                continue;
            }
            Segment seg = new Segment(sm, c.blockIds(), c.firstBlock(), c.totalBlocks(), c.last());
            lw.segments.add(seg);
            stepSegments.add(seg);
        }
    }

    /** vLLM's {@code save_kv_layer}: layer {@code layerName} of this step's chunks is written (sender loop). */
    void onLayerSaved(String layerName) {
        if (!layerwise || stepSegments.isEmpty()) {
            return;
        }
        if (!layerNameSet.contains(layerName)) {
            if (unknownLayersLogged.size() < MAX_DISTINCT_REJECTIONS && unknownLayersLogged.add(layerName)) {
                LOG.warn("saveKvLayer({}): not a registered KV layer; ignored (its chunk's layers go at "
                        + "waitForSave)", layerName);
            }
            return;
        }
        for (Segment seg : stepSegments) {
            if (!seg.complete && seg.saved.add(layerName)) {
                emit(seg, List.of(layerName));
                if (seg.saved.size() == layerNames.size()) {
                    complete(seg);
                }
            }
        }
    }

    /** vLLM's {@code wait_for_save}: the forward pass ended; layers not saved yet go now (sender loop). */
    void onForwardDone() {
        List<Segment> segs = stepSegments;
        stepSegments = new ArrayList<>();
        for (Segment seg : segs) {
            if (seg.complete) {
                continue;
            }
            List<String> missing = new ArrayList<>();
            for (String l : layerNames) {
                if (seg.saved.add(l)) {
                    missing.add(l);
                }
            }
            if (!missing.isEmpty()) {
                emit(seg, missing);
            }
            complete(seg);
        }
    }

    private void emit(Segment seg, List<String> layers) {
        Layerwise lw = seg.sm.layerwise;
        lw.events.add(new Event(seg, layers));
        for (Target t : new ArrayList<>(lw.targets)) {
            pump(t);
        }
    }

    private void complete(Segment seg) {
        seg.complete = true;
        Layerwise lw = seg.sm.layerwise;
        if (seg.last) {
            lw.allSaved = true;
        }
        for (Target t : new ArrayList<>(lw.targets)) {
            checkLanded(t);
        }
    }

    /** {@code request_finished} came before the last chunk was saved: whatever was not pushed goes whole. */
    private void closeLayerwise(SendBlockMeta sm, int[][] blockIds) {
        Layerwise lw = sm.layerwise;
        if (lw == null || lw.allSaved) {
            return;
        }
        LOG.warn("transfer {} finished on P before its last layer-wise chunk was saved; pushing its KV whole",
                sm.transferId);
        int total = 0;
        for (int[] g : blockIds) {
            total = Math.max(total, g.length);
        }
        stepSegments.removeIf(s -> s.sm == sm);
        Segment seg = new Segment(sm, blockIds, 0, total, true);
        lw.segments.add(seg);
        seg.saved.addAll(layerNames);
        emit(seg, layerNames);
        complete(seg);
    }

    /** Pushes {@code dReqId} of {@code pull} layer by layer when its blocks pair with P's (else: whole, as today). */
    private void addTarget(Pull pull, String dReqId, SendBlockMeta sm) {
        int[][] remote = pull.remoteBlocks.get(dReqId);
        Layerwise lw = sm.layerwise;
        if (remote == null || lw == null || pull.lwTargets.containsKey(dReqId)) {
            return;
        }
        boolean any = false;
        for (int[] g : remote) {
            any |= g.length > 0;
        }
        if (!any) {
            return; // nothing to write: the whole-request path answers it
        }
        Target t = new Target(pull, dReqId, sm, remote);
        pull.lwTargets.put(dReqId, t);
        lw.targets.add(t);
        pump(t);
    }

    /** Submits every saved event {@code t} has not written yet as one write (sender loop). */
    private void pump(Target t) {
        Pull pull = t.pull;
        Layerwise lw = t.sm.layerwise;
        if (pull.done || t.landed || t.failed != null || t.cursor >= lw.events.size()) {
            checkLanded(t);
            return;
        }
        if (t.inflight > 0 && inFlightByPeer.getOrDefault(pull.peer, 0) >= perPeerShare) {
            // a write of this request runs or waits for D's share already: rather than queue one write
            // per layer behind it, its end pumps again and every layer saved meanwhile goes in one write
            coalescedLayers.increment();
            return;
        }
        buf.clear();
        String err = null;
        try {
            while (t.cursor < lw.events.size() && err == null) {
                Event ev = lw.events.get(t.cursor++);
                err = planEvent(t, ev);
            }
        } catch (TransferPlanningException | IllegalArgumentException | IllegalStateException e) {
            err = e.getMessage();
        } catch (RuntimeException e) {
            // a bug, reported; the request fails for D rather than landing with a layer missing
            errors.report("sender loop", e);
            err = "Error planning a layer-wise transfer: " + e;
        }
        if (err != null) {
            buf.clear();
            t.failed = err;
            checkLanded(t);
            return;
        }
        if (buf.isEmpty()) {
            checkLanded(t);
            return;
        }
        String session = pull.meta.remoteHostname() + ":" + pull.meta.remotePort();
        long[] src = buf.copySrc();
        long[] dst = buf.copyDst();
        long[] len = buf.copyLen();
        long bytes = buf.totalBytes();
        buf.clear();
        t.inflight++;
        pull.lwInflight++;
        layerWritesInFlight.incrementAndGet();
        t.sm.sending++; // blocks expiry while P writes from these blocks
        layerJobs.increment();
        long contact = pull.lastContact;
        String peer = pull.peer;
        Runnable job = () -> {
            int ret;
            writing.incrementAndGet();
            try {
                if (pull.done) {
                    ret = ABANDONED;
                } else if (clock.getAsLong() - contact - abortNanos > 0) {
                    ret = STALE;
                } else {
                    ret = sendBlocks(session, src, dst, len, bytes);
                }
            } finally {
                writing.decrementAndGet();
            }
            try {
                loop.execute(errors.guarded("sender loop", () -> {
                    releaseShare(peer);
                    onLayerWritten(t, ret);
                }));
            } catch (RejectedExecutionException e) {
                LOG.debug("sender loop stopped; dropping the result of a layer-wise transfer to {}", session);
            }
        };
        int inFlight = inFlightByPeer.getOrDefault(peer, 0);
        if (inFlight >= perPeerShare) {
            wavesQueuedForShare.increment();
            queuedByPeer.computeIfAbsent(peer, k -> new ArrayDeque<>()).addLast(job);
            refreshHookHint();
            return;
        }
        inFlightByPeer.put(peer, inFlight + 1);
        submit(peer, job, () -> onLayerWritten(t, -1));
        refreshHookHint();
    }

    /** Appends the descriptors of {@code ev} for {@code t} to {@link #buf}; a per-request error, or null. */
    private String planEvent(Target t, Event ev) {
        Segment seg = ev.segment();
        int groups = t.remote.length;
        if (seg.local.length != groups) {
            return TransferPlanner.KV_GROUP_COUNT_MISMATCH;
        }
        int[][] loc = new int[groups][];
        int[][] rem = new int[groups][];
        boolean any = false;
        for (int g = 0; g < groups; g++) {
            int[] rg = t.remote[g];
            int offset = seg.total - rg.length; // D's prefix hit: P's first blocks pair with nothing
            if (offset < 0) {
                return TransferPlanner.P_NUM_BLOCKS_LESS_THAN_D;
            }
            int[] lg = seg.local[g];
            int skip = Math.max(0, offset - seg.first);
            int n = Math.max(0, lg.length - skip);
            loc[g] = Arrays.copyOfRange(lg, Math.min(skip, lg.length), lg.length);
            rem[g] = n == 0 ? new int[0] : Arrays.copyOfRange(rg, seg.first + skip - offset, seg.first + skip - offset + n);
            any |= n > 0;
        }
        if (!any) {
            return null;
        }
        Map<String, PreparedRegions> byLayer = regionsByLayer(t.pull);
        for (String layer : ev.layers()) {
            PreparedRegions pr = byLayer.get(layer);
            if (pr == null) {
                continue; // not a layer this D holds (pipeline-parallel partial layers)
            }
            String err = planner.planRequest(t.dReqId, loc, rem, pr, buf);
            if (err != null) {
                return err;
            }
        }
        return null;
    }

    private Map<String, PreparedRegions> regionsByLayer(Pull pull) {
        Prepared cached = pull.prepared;
        if (cached.byLayer == null) {
            Map<String, List<TransferRegion>> loc = new LinkedHashMap<>();
            Map<String, List<TransferRegion>> rem = new LinkedHashMap<>();
            List<TransferRegion> l = pull.regions.local();
            List<TransferRegion> r = pull.regions.remote();
            for (int i = 0; i < l.size(); i++) {
                loc.computeIfAbsent(l.get(i).layerName(), k -> new ArrayList<>()).add(l.get(i));
                rem.computeIfAbsent(l.get(i).layerName(), k -> new ArrayList<>()).add(r.get(i));
            }
            Map<String, PreparedRegions> out = new HashMap<>();
            for (Map.Entry<String, List<TransferRegion>> e : loc.entrySet()) {
                out.put(e.getKey(), planner.preparePairs(e.getValue(), rem.get(e.getKey()), pull.meta.remoteTpRank(),
                        pull.meta.remoteTpSize()));
            }
            cached.byLayer = out;
        }
        return cached.byLayer;
    }

    private void onLayerWritten(Target t, int ret) {
        t.inflight--;
        t.pull.lwInflight--;
        t.sm.sending--;
        layerWritesInFlight.decrementAndGet();
        everyTargetWriting = false; // until refreshed below: a hook from now on wakes the loop
        runLayerHooks(); // the hooks that counted on this write's result (offerFromModelRunner)
        if (ret != 0 && t.failed == null) {
            if (ret == STALE) {
                staleWaves.increment();
                t.failed = STALE_WAVE_MESSAGE;
            } else if (ret == ABANDONED) {
                t.failed = ABANDONED_MESSAGE;
            } else {
                t.failed = "Mooncake transfer engine returned " + ret;
            }
            LOG.warn("Layer-wise write of {} to D {} failed: {}", t.dReqId, t.pull.peer, t.failed);
        }
        if (t.failed == null) {
            pump(t);
        } else {
            checkLanded(t);
        }
        refreshHookHint();
    }

    /** Every byte of {@code t} landed, or it failed and nothing of it is in flight: its wave can answer D. */
    private void checkLanded(Target t) {
        if (t.landed || t.pull.done || t.inflight > 0) {
            return;
        }
        Layerwise lw = t.sm.layerwise;
        if (t.failed == null && !(lw.allSaved && t.cursor == lw.events.size())) {
            return;
        }
        t.landed = true;
        lw.targets.remove(t);
        if (t.pull.pending.containsKey(t.dReqId)) {
            t.pull.readyNow.add(t.dReqId);
            scheduleWave(t.pull);
        }
    }

    /** Layer-wise writes submitted (one per pump of a target), for diagnostics and tests. */
    long layerwiseWrites() {
        return layerJobs.sum();
    }

    /** Saved layers that waited for a running write of their request, to go with the next one. */
    long coalescedLayers() {
        return coalescedLayers.sum();
    }

    // ------------------------------------------------------------------------------ bookkeeping

    /** vLLM's {@code record_send_reqs}, with §15 #2 fixed: unknown transfer ids never throw. */
    void recordSendReqs(MooncakeConnectorMetadata metadata) {
        long now = clock.getAsLong();
        for (Map.Entry<String, MooncakeConnectorMetadata.ReqToSend> e : metadata.reqsToSend().entrySet()) {
            String pReqId = e.getKey();
            String transferId = e.getValue().transferId();
            int[][] blockIds = e.getValue().localBlockIds();
            if (blockIds.length > 0) { // from request_finished
                SendBlockMeta sm = reqsNeedSend.get(transferId);
                if (sm == null) {
                    LOG.warn("Request {} (transfer {}) finished on P but is not pending a send (never announced, "
                            + "or expired); freeing its blocks at once.", pReqId, transferId);
                    markFinishedSending(pReqId);
                    continue;
                }
                if (sm.isPlaceholder()) {
                    placeholders--;
                }
                sm.pReqId = pReqId;
                sm.localBlockIds = blockIds;
                sm.expireNanos = now + abortNanos;
                holdExpiry.add(sm.expireNanos, sm, reqsNeedSend.size());
                armExpiryWake(sm.expireNanos);
                closeLayerwise(sm, blockIds);
                sm.ready.complete(null);
                if (sm.sentEarly && reqsNeedSend.remove(transferId, sm)) {
                    markFinishedSending(pReqId);
                }
            } else { // from update_state_after_alloc
                SendBlockMeta sm = reqsNeedSend.get(transferId);
                if (sm == null) {
                    reqsNeedSend.put(transferId, new SendBlockMeta(pReqId, transferId, new int[0][], now));
                } else if (sm.isPlaceholder()) {
                    sm.pReqId = pReqId; // P now owns it: no placeholder expiry any more
                    placeholders--;
                }
            }
        }
        for (String transferId : metadata.reqsNotProcessed()) {
            SendBlockMeta sm = reqsNeedSend.remove(transferId);
            if (sm != null && sm.isPlaceholder()) {
                placeholders--;
            }
            if (sm == null) {
                LOG.debug("reqs_not_processed names transfer {} that is not pending; ignored", transferId);
            } else if (sm.ready.isDone()) {
                LOG.warn("Transfer {} was aborted after its blocks were recorded", transferId);
            }
        }
        recordLayerwiseChunks(metadata.layerwiseChunks());
    }

    /**
     * Sets what runs (sender loop) when {@link #fetchFinishedSending} has something new: an id was
     * queued as finished, or a recorded request's hold expired; it must not throw (the worker guards it).
     */
    void onFinished(Runnable r) {
        onFinished = java.util.Objects.requireNonNull(r, "r");
    }

    private void markFinishedSending(String pReqId) {
        finishedSendingReqs.add(pReqId);
        onFinished.run();
    }

    /**
     * Arms one timer on the sender loop for the earliest expiry deadline {@code at} (loop thread).
     * Expiry is done by {@link #fetchFinishedSending}; this timer only tells the listener that a fetch
     * would now find an expired hold. One timer at a time: the next deadline ({@link #holdExpiry}) is
     * armed when it fires, so P holds no timer per request and a tick costs what is due, not a scan.
     */
    private void armExpiryWake(long at) {
        ScheduledFuture<?> armed = expiryWake;
        if (armed != null && !armed.isDone()) {
            if (expiryWakeAt - at <= 0) {
                return; // an earlier deadline is armed: it re-arms for this one when it fires
            }
            armed.cancel(false);
        }
        expiryWakeAt = at;
        // 1 ms past the deadline, so that fetchFinishedSending's strict test holds when it runs
        long delay = Math.max(0, at - clock.getAsLong()) + TimeUnit.MILLISECONDS.toNanos(1);
        try {
            expiryWake = loop.schedule(errors.guarded("sender loop", this::onExpiryWake), delay,
                    TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            expiryWake = null; // closing
        }
    }

    private void onExpiryWake() {
        expiryWake = null;
        long now = clock.getAsLong();
        boolean due = holdExpiry.anyDue(now, sm -> sm.sending == 0);
        OptionalLong next = holdExpiry.nextDeadline();
        if (holdExpiry.anyDue(now, sm -> sm.sending > 0)) {
            // expired with a wave in flight: it expires when the wave fails, checked again shortly
            // (rare: only a hold that timed out while being written)
            long retry = now + Math.min(abortNanos, TimeUnit.MILLISECONDS.toNanos(100));
            next = OptionalLong.of(next.isPresent() && next.getAsLong() - retry < 0 ? next.getAsLong() : retry);
        }
        if (next.isPresent()) {
            armExpiryWake(next.getAsLong());
        }
        if (due) {
            onFinished.run();
        }
    }

    /** vLLM's {@code fetch_finished_sending_reqs} with expiry (§6.12); placeholders expire too (§15 #3 fixed). */
    Set<String> fetchFinishedSending() {
        runLayerHooks();
        Set<String> out = finishedSendingReqs;
        finishedSendingReqs = new LinkedHashSet<>();
        long now = clock.getAsLong();
        holdExpiry.expireDue(now, sm -> {
            if (sm.sending > 0) {
                return false; // a wave in flight: it expires once the wave is done
            }
            LOG.warn("Request {} timed out after {} seconds without being sent. Freeing its blocks on the "
                    + "producer side.", sm.pReqId, TimeUnit.NANOSECONDS.toSeconds(abortNanos));
            stats.recordKvExpiredReq();
            out.add(sm.pReqId);
            reqsNeedSend.remove(sm.transferId, sm);
            return true;
        });
        placeholderExpiry.expireDue(now, sm -> {
            if (sm.sending > 0 || sm.waiters > 0) {
                return false; // a pull waits for it: it expires once none does
            }
            LOG.warn("Transfer {} was pulled by D but never scheduled on P {}; dropping its placeholder after "
                    + "{} seconds.", sm.transferId, engineLabel, TimeUnit.NANOSECONDS.toSeconds(abortNanos));
            placeholdersExpired.increment();
            placeholders--;
            reqsNeedSend.remove(sm.transferId, sm);
            return true;
        });
        return out;
    }

    /** Entries held by the two expiry queues, dead ones not yet dropped included (tests: they stay bounded). */
    int expiryEntries() {
        return holdExpiry.size() + placeholderExpiry.size();
    }

    /** Entries of {@code reqs_need_send} (loop thread). */
    int pendingTransfers() {
        return reqsNeedSend.size();
    }

    /** Pulls being served (loop thread). */
    int activePulls() {
        return activePulls.size();
    }

    long errorReplies() {
        return errorReplies.sum();
    }

    long placeholdersExpired() {
        return placeholdersExpired.sum();
    }

    /** Pulls refused with ERROR because a {@link SideChannelLimits} bound would have been exceeded. */
    long limitRejections() {
        return limitRejections.sum();
    }

    /** Waves not written because they could not start within the staleness bound. */
    long staleWaves() {
        return staleWaves.sum();
    }

    /** Waves that waited on the loop because their D already used its share of the transfer pool. */
    long wavesQueuedForShare() {
        return wavesQueuedForShare.sum();
    }

    /**
     * Ends every pull being served, without answering (sender loop; the answers could not reach D):
     * a wave of theirs not yet started is never written. Used when the ROUTER is reset (the peers'
     * identities are lost) and at shutdown. Complete when the loop has run it; then wait for
     * {@link #writesIdle()} before closing the ROUTER's port, so that a D that sees the port refused
     * knows that no write into its blocks is still running.
     */
    @Override
    public java.util.concurrent.CompletableFuture<Void> abandonAllPulls(String reason) {
        return java.util.concurrent.CompletableFuture.runAsync(() -> {
            if (!activePulls.isEmpty()) {
                LOG.warn("Abandoning {} side-channel pull(s): {}", activePulls.size(), reason);
            }
            for (Pull pull : new ArrayList<>(activePulls)) {
                end(pull);
            }
        }, loop);
    }

    /** No transfer-pool job is between its abandonment check and the end of its write. */
    @Override
    public boolean writesIdle() {
        return writing.get() == 0;
    }

    /** Stops the transfer pool; in-flight transfers are not cancelled (spec §15 #15), waited for briefly. */
    @Override
    public void close() {
        xferPool.shutdown();
        try {
            if (!xferPool.awaitTermination(5, TimeUnit.SECONDS)) {
                xferPool.shutdownNow();
                if (!xferPool.awaitTermination(5, TimeUnit.SECONDS)) {
                    LOG.error("mooncake-p-xfer threads did not stop within 10 s (a transfer is blocked)");
                }
            }
        } catch (InterruptedException e) {
            xferPool.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
