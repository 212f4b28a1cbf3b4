package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.plan.DescriptorBuffer;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.send.Layerwise.Event;
import io.mooncake4j.connector.worker.send.Layerwise.Segment;
import io.mooncake4j.connector.worker.send.Layerwise.Target;
import io.mooncake4j.connector.worker.send.PreparedShapes.Prepared;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Layer-wise push: with {@code layerwise_push}, a transfer whose prefill chunks are named in the step's
 * metadata is written to every D pull already there as each layer is saved (see {@link KvSender}). It owns
 * the layer-wise state: the current step's chunks, the model runner's queue of layer hooks and the hint
 * that saves the loop a wake-up per layer, its descriptor buffer and its counters; the per-transfer and
 * per-pull progress lives on {@link Layerwise} and {@link Pull}, which it alone writes.
 *
 * <p><b>Threads.</b> Sender loop ({@code mooncake-p-sender-0}) only, except {@link #offerFromModelRunner}
 * (the model runner's thread) and {@link #layerHookWakeups} (any thread). Its writes run on the transfer
 * pool through {@link BlockWriter#write} and post their result back to the loop.
 */
final class LayerwisePush {

    /** The send path's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);
    /** Distinct unknown layer names logged at WARN (a bounded log). */
    private static final int MAX_DISTINCT_REJECTIONS = 256;

    private final boolean layerwise;
    private final TransferPlanner planner;
    private final PendingSends pending;
    /** The pulls being served ({@link KvSender} owns them; read here). */
    private final Collection<Pull> activePulls;
    private final PoolShares shares;
    private final BlockWriter writer;
    private final BackgroundErrors errors;
    private final ScheduledExecutorService loop;
    /** A target landed (or failed) and its request is pending in its pull: that pull's next wave is due. */
    private final Consumer<Pull> onLanded;

    // layer-wise push state: sender loop only unless a comment says otherwise
    /** The scratch buffer a layer-wise write is planned into. */
    private final DescriptorBuffer buf = new DescriptorBuffer(1024);
    /** The distinct registered layer names, in registration order: a chunk is saved when all of them are. */
    private final List<String> layerNames;
    private final Set<String> layerNameSet;
    /** The chunks of the current forward pass (from the step's metadata), until {@link #onForwardDone}. */
    private List<Segment> stepSegments = new ArrayList<>();
    private final Set<String> unknownLayersLogged = new HashSet<>();
    private final LongAdder layerJobs = new LongAdder();
    private final LongAdder coalescedLayers = new LongAdder();
    /** The model runner's tasks ({@link #offerFromModelRunner}) not run yet, in call order. */
    private final ConcurrentLinkedQueue<Runnable> layerHooks = new ConcurrentLinkedQueue<>();
    /** A task that runs {@link #layerHooks} is queued on the sender loop and has not started. */
    private final AtomicBoolean hookDrainQueued = new AtomicBoolean();
    /** Layer-wise writes submitted whose result the sender loop has not handled (loop writes, any thread reads). */
    private final AtomicInteger layerWritesInFlight = new AtomicInteger();
    /** Every live layer-wise target has a write in flight (sender loop writes; a hint for {@link #offerFromModelRunner}). */
    private volatile boolean everyTargetWriting;
    private final LongAdder hookWakeups = new LongAdder();

    /**
     * @param layerwise    layer-wise push is on ({@code layerwise_push}); off, only the model runner's queue is used
     * @param localRegions P's registered regions (their layer names)
     * @param activePulls  the pulls being served, read only (sender loop)
     * @param onLanded     asks for {@code pull}'s next wave (sender loop)
     */
    LayerwisePush(boolean layerwise, List<TransferRegion> localRegions, TransferPlanner planner, PendingSends pending,
            Collection<Pull> activePulls, PoolShares shares, BlockWriter writer, BackgroundErrors errors,
            ScheduledExecutorService loop, Consumer<Pull> onLanded) {
        this.layerwise = layerwise;
        this.planner = planner;
        this.pending = pending;
        this.activePulls = activePulls;
        this.shares = shares;
        this.writer = writer;
        this.errors = errors;
        this.loop = loop;
        this.onLanded = onLanded;
        LinkedHashSet<String> names = new LinkedHashSet<>();
        for (TransferRegion r : localRegions) {
            names.add(r.layerName());
        }
        this.layerNames = List.copyOf(names);
        this.layerNameSet = Set.copyOf(names);
    }

    /** Layer-wise push is on ({@code layerwise_push}). */
    boolean enabled() {
        return layerwise;
    }

    /**
     * Hands a task of the model runner's thread to the sender loop: a layer hook ({@code
     * saveKvLayer} / {@code waitForSave}, {@code mustWake} false) or the step's metadata ({@link
     * KvSender#recordSendReqs}, true). All of them run on the loop in call order, through one queue. The
     * loop is woken for a hook only when nothing else would run it soon: while every layer-wise
     * target has a write in flight, the first write's result runs the queue (a layer saved then
     * would wait for that write anyway), and a run of the queue already handed to the loop takes
     * everything added before it starts. So a forward pass whose transfer lags hands the loop one
     * task per write instead of one per layer; the layers saved meanwhile go in the next write as
     * before. {@link KvSender#fetchFinishedSending} runs the queue first (the model runner's earlier calls).
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
    void runLayerHooks() {
        for (Runnable h = layerHooks.poll(); h != null; h = layerHooks.poll()) {
            h.run(); // each is guarded by the worker: one failing does not drop the rest
        }
    }

    /** Tasks handed to the sender loop to run the model runner's queue (diagnostics and tests). */
    long layerHookWakeups() {
        return hookWakeups.sum();
    }

    /** Sender loop: whether every live layer-wise target has a write in flight (see {@link #offerFromModelRunner}). */
    void refreshHookHint() {
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
    void recordChunks(Map<String, MooncakeConnectorMetadata.LayerwiseChunk> chunks) {
        if (!layerwise) {
            return;
        }
        onForwardDone();
        for (Map.Entry<String, MooncakeConnectorMetadata.LayerwiseChunk> e : chunks.entrySet()) {
            MooncakeConnectorMetadata.LayerwiseChunk c = e.getValue();
            SendBlockMeta sm = pending.get(c.transferId());
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

    void emit(Segment seg, List<String> layers) {
        Layerwise lw = seg.sm.layerwise;
        lw.events.add(new Event(seg, layers));
        for (Target t : new ArrayList<>(lw.targets)) {
            pump(t);
        }
    }

    void complete(Segment seg) {
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
    void closeLayerwise(SendBlockMeta sm, int[][] blockIds) {
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
    void addTarget(Pull pull, String dReqId, SendBlockMeta sm) {
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
    void pump(Target t) {
        Pull pull = t.pull;
        Layerwise lw = t.sm.layerwise;
        if (pull.done || t.landed || t.failed != null || t.cursor >= lw.events.size()) {
            checkLanded(t);
            return;
        }
        if (t.inflight > 0 && shares.full(pull.peer)) {
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
            int ret = writer.write(pull, contact, session, src, dst, len, bytes);
            try {
                loop.execute(errors.guarded("sender loop", () -> {
                    shares.release(peer);
                    onLayerWritten(t, ret);
                }));
            } catch (RejectedExecutionException e) {
                LOG.debug("sender loop stopped; dropping the result of a layer-wise transfer to {}", session);
            }
        };
        if (!shares.take(peer)) {
            shares.queue(peer, job);
            refreshHookHint();
            return;
        }
        shares.submit(peer, job, () -> onLayerWritten(t, -1));
        refreshHookHint();
    }

    /** Appends the descriptors of {@code ev} for {@code t} to {@link #buf}; a per-request error, or null. */
    String planEvent(Target t, Event ev) {
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

    Map<String, PreparedRegions> regionsByLayer(Pull pull) {
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

    void onLayerWritten(Target t, int ret) {
        t.inflight--;
        t.pull.lwInflight--;
        t.sm.sending--;
        layerWritesInFlight.decrementAndGet();
        everyTargetWriting = false; // until refreshed below: a hook from now on wakes the loop
        runLayerHooks(); // the hooks that counted on this write's result (offerFromModelRunner)
        if (ret != 0 && t.failed == null) {
            if (ret == BlockWriter.STALE) {
                writer.staleWave();
                t.failed = BlockWriter.STALE_WAVE_MESSAGE;
            } else if (ret == BlockWriter.ABANDONED) {
                t.failed = BlockWriter.ABANDONED_MESSAGE;
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
    void checkLanded(Target t) {
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
            onLanded.accept(t.pull);
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
}
