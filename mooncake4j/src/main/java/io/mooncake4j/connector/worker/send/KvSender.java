package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.wire.ProtocolException;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.connector.worker.SideChannelLimits;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.PlanErrors;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.ReadyRequest;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.send.Layerwise.Target;
import io.mooncake4j.connector.worker.send.PreparedShapes.Prepared;
import io.mooncake4j.engine.TransferEngine;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.ToIntFunction;

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
 * <p><b>Bounds.</b> A pull is refused with an {@code ERROR} response, before anything is
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
 * <p><b>Layer-wise push.</b> With {@code layerwise_push}, a transfer whose prefill chunks
 * are named in the step's metadata is written layer by layer as {@link #onLayerSaved} reports each
 * layer (the rest of a chunk at {@link #onForwardDone}): to every D pull already there, and to a pull
 * that arrives later all saved layers at once. Each such write passes the same staleness check, the
 * same abandonment check and the same per-D pool share as a wave. The request joins a wave (and so
 * D's {@code FINISH}) only when its last chunk is saved and every write of it landed; the first
 * failed write stops its writes and fails it for D once (in {@code err_reqs}), when nothing of it is
 * in flight. D's side and the messages are unchanged.
 */
public final class KvSender extends SendBookkeeping implements SideChannelHandler, Quiesce, AutoCloseable {

    /** A ready request of a wave, as the planner sees it. */
    record Ready(String dReqId, SendBlockMeta sendMeta, int[][] remoteBlockIds) implements ReadyRequest {
        @Override
        public int[][] localBlockIds() {
            return sendMeta.localBlockIds;
        }
    }

    // the side channel's state: sender loop only unless a comment says otherwise
    private final TransferTopology topology;
    private final PlanErrors planErrors = new PlanErrors();
    private final Set<String> rejectedLogged = new HashSet<>(); // sender loop only
    private final LongAdder errorReplies = new LongAdder();
    private final LongAdder limitRejections = new LongAdder();
    /** Pulls (or writes) refused because their destination is P's own engine. */
    private final LongAdder selfAimedRefusals = new LongAdder();
    /** What P's own engine is called and where it listens. */
    private final SelfTargets selfTargets;
    /** A kv_both worker: its own receiver's pulls name its own engine (set before the first pull). */
    private volatile boolean selfAimedPullsAccepted;

    public KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits) {
        this(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, false);
    }

    public KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
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
    public KvSender(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits, boolean layerwise,
            int transferThreadNice) {
        super(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, layerwise, transferThreadNice);
        String segment = engine.getLocalSegmentName();
        int colon = segment.lastIndexOf(':');
        this.selfTargets = new SelfTargets(segment, engine.getRpcPort(), colon < 0 ? segment : segment.substring(0, colon));
        this.topology = planner.topology();
    }

    /** What this P's KV blocks mean, or null: a pull naming another layout is refused. */
    private volatile String kvLayout;

    /**
     * Sets this P's KV layout (before pulls arrive): a pull whose {@code mooncake4j_kv_layout} differs is refused
     * with an {@code ERROR} answer naming both, before anything is written; a pull without one (a vLLM D) is served.
     *
     * @param layout the layout, or null to compare nothing
     */
    public void kvLayout(String layout) {
        this.kvLayout = layout;
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
    void logRejected(String msg) {
        if (rejectedLogged.size() < MAX_DISTINCT_REJECTIONS && rejectedLogged.add(String.valueOf(msg))) {
            LOG.error("Error processing Mooncake xfer request: {} (repeats are logged at DEBUG)", msg);
        } else {
            LOG.debug("Error processing Mooncake xfer request: {}", msg);
        }
    }

    void replyError(ReplySink reply, String msg) {
        errorReplies.increment();
        send(reply, MooncakeXferResponse.error(msg));
    }

    static void send(ReplySink reply, MooncakeXferResponse resp) {
        send(reply, resp.status(), MooncakeXferResponseCodec.encode(resp));
    }

    /** A {@code CONTINUE} is not the message's final answer; {@code FINISH} and {@code ERROR} are. */
    static void send(ReplySink reply, MooncakeXferResponseStatus status, byte[] encoded) {
        if (status == MooncakeXferResponseStatus.CONTINUE) {
            reply.sendContinue(encoded);
        } else {
            reply.send(encoded);
        }
    }

    void sendKvToDecode(byte[] identity, ReplySink reply, MooncakeXferMetadata meta, long bytes) {
        String peer = meta.remoteHostname() + ":" + meta.remotePort();
        String self = selfAimedPullsAccepted ? null : selfTargets.refusal(meta.remoteHostname(), meta.remotePort());
        if (self != null) {
            selfAimedRefusals.increment();
            logRejected("a pull aimed at this P worker's own engine was refused (ERROR answer)");
            LOG.debug("{}", self);
            replyError(reply, self);
            return;
        }
        String limit = pendingLimits.limitError(peer, meta, bytes, reqsNeedSend::containsKey);
        if (limit != null) {
            limitRejections.increment();
            logRejected("P side-channel limit exceeded (pending transfers, placeholders or metadata bytes); "
                    + "the pull got an ERROR response");
            LOG.debug("{}", limit);
            replyError(reply, limit);
            return;
        }
        String ours = kvLayout;
        if (ours != null && meta.kvLayout() != null && !ours.equals(meta.kvLayout())) {
            String msg = String.format(Locale.ROOT, "KV layout mismatch: this prefill node's KV layout %s differs from "
                    + "the decode node's %s; nothing was transferred; pair nodes that serve the same checkpoint", ours,
                    meta.kvLayout());
            logRejected("a pull of another KV layout was refused (ERROR answer)");
            LOG.debug("{}", msg);
            replyError(reply, msg);
            return;
        }
        String pairing = topology.pairingError(meta.remoteTpRank(), meta.remoteTpSize());
        if (pairing != null) {
            logRejected(pairing);
            replyError(reply, pairing);
            return;
        }
        Prepared cached = preparedShapes.prepared(meta);
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
        List<String> knownOk = new ArrayList<>();
        List<String> knownErr = new ArrayList<>();
        String knownMsg = null;
        for (Map.Entry<String, MooncakeXferMetadata.ReqBlocks> e : meta.reqBlocks().entrySet()) {
            String transferId = e.getValue().transferId();
            String key = RetriedPulls.key(peer, e.getKey(), transferId);
            if (retried.servedBy(key) != null) { // a re-send: it hears the first pull's outcome, no second write
                pull.followed.add(e.getKey());
                retried.follow(key, pull);
                continue;
            }
            RetriedPulls.Outcome known = retried.answered(key, now);
            SendBlockMeta sm = reqsNeedSend.get(transferId);
            if (known == null && sm == null && retried.finishedLately(transferId, now)) {
                retried.forgotten();
                known = new RetriedPulls.Outcome(false, String.format(Locale.ROOT, RetriedPulls.FORGOTTEN_MESSAGE,
                        transferId, e.getKey()), now);
            }
            if (known != null) { // answered already: answered again, never written again
                (known.ok() ? knownOk : knownErr).add(e.getKey());
                knownMsg = known.ok() || knownMsg != null ? knownMsg : known.errMsg();
                continue;
            }
            retried.serve(key, pull);
            if (sm == null) { // D arrived before P's scheduler
                sm = new SendBlockMeta("", transferId, new int[0][], now);
                reqsNeedSend.put(transferId, sm);
                pendingLimits.placeholderAdded();
                placeholderExpiry.add(now + abortNanos, sm, reqsNeedSend.size());
            }
            if (pull.pending.put(e.getKey(), sm) == null) {
                sm.waiters++;
            }
        }

        if (pull.pending.isEmpty() && pull.followed.isEmpty()) {
            send(reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, knownOk, knownErr, knownMsg));
            return;
        }
        if (!knownOk.isEmpty() || !knownErr.isEmpty()) {
            send(reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.CONTINUE, knownOk, knownErr, knownMsg));
        }
        activePulls.add(pull);
        pendingLimits.pend(pull.peer, pull.pending.size() + pull.followed.size(), pull.bytes);
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

    static int[][] toInts(long[][] ids) {
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

    void armTimeout(Pull pull) {
        pull.timeout = loop.schedule(errors.guarded("sender loop", () -> onTimeout(pull)), abortNanos,
                TimeUnit.NANOSECONDS);
    }

    void onReady(Pull pull, String dReqId) {
        if (pull.done || !pull.pending.containsKey(dReqId) || pull.lwTargets.containsKey(dReqId)) {
            return; // a layer-wise request is ready when its last layer landed (checkLanded)
        }
        pull.readyNow.add(dReqId);
        scheduleWave(pull);
    }

    void scheduleWave(Pull pull) {
        if (!pull.waveScheduled && !pull.busy) {
            pull.waveScheduled = true;
            loop.execute(errors.guarded("sender loop", () -> {
                pull.waveScheduled = false;
                processWave(pull);
            }));
        }
    }

    void onTimeout(Pull pull) {
        if (pull.done || pull.busy || !pull.readyNow.isEmpty()) {
            return; // a wave is due; it re-arms the timeout
        }
        if (pull.lwInflight > 0 || !pull.followed.isEmpty()) {
            armTimeout(pull); // answer only once no write of this pull (or of the pull it follows) is running
            return;
        }
        List<String> ids = new ArrayList<>(pull.pending.keySet());
        LOG.warn("Timeout waiting for P side ready: {}", ids);
        send(pull.reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, ids, READY_TIMEOUT_MESSAGE));
        for (String id : ids) {
            settle(pull, id, false, READY_TIMEOUT_MESSAGE, true);
        }
        end(pull);
    }

    void end(Pull pull) {
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
        for (String id : List.copyOf(pull.pending.keySet())) {
            settle(pull, id, false, ABANDONED_MESSAGE, false); // not answered: a re-send is served afresh
        }
        if (activePulls.contains(pull)) {
            pendingLimits.unpendAll(pull.peer, pull.pending.size() + pull.followed.size(), pull.bytes);
        }
        pull.pending.clear();
        pull.followed.clear(); // its followings are dropped when the first pulls settle
        pull.readyNow.clear();
        activePulls.remove(pull);
    }

    void processWave(Pull pull) {
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
            pendingLimits.unpend(pull.peer, 1);
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
        MooncakeXferResponseStatus status = pull.pending.isEmpty() && pull.followed.isEmpty()
                ? MooncakeXferResponseStatus.FINISH : MooncakeXferResponseStatus.CONTINUE;
        buf.clear();
        planErrors.clear();
        try {
            planner.plan(ready, pull.regions, buf, planErrors);
        } catch (TransferPlanningException | IllegalArgumentException | IllegalStateException e) {
            buf.clear();
            for (Ready r : ready) {
                r.sendMeta().sending--;
            }
            for (Ready r : lwDone) {
                r.sendMeta().sending--;
            }
            LOG.error("Error processing Mooncake xfer request: {}", e.getMessage());
            replyError(pull.reply, e.getMessage());
            for (Ready r : ready) {
                settle(pull, r.dReqId(), false, e.getMessage(), true);
            }
            for (Ready r : lwDone) {
                settle(pull, r.dReqId(), false, e.getMessage(), true);
            }
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
            xferPool.writeStarted(); // before the check: abandonAllPulls' waiter sees this write
            try {
                if (pull.done) {
                    ret = ABANDONED;
                } else if (clock.getAsLong() - contact - abortNanos > 0) {
                    ret = STALE; // D may have given up: its blocks may belong to another request by now
                } else {
                    ret = sendBlocks(session, src, dst, len, bytes);
                }
            } finally {
                xferPool.writeEnded();
            }
            // Every byte landed: D's answer is known already (it depends on the wave alone), so it goes
            // from here, before the hand-off of the bookkeeping to the loop (waking the loop
            // first lets it take this thread's core). A pull D sends after reading the answer may then
            // reach the loop before that bookkeeping: it pairs with other transfers, and the counters
            // it meets (pending ids, pool share) are at most this wave's higher, for that moment.
            long answeredAt = NOT_ANSWERED;
            if (ret == 0 && !loop.isShutdown()) {
                MooncakeXferResponse resp = answer(ready, errReqs, wErrMsg, status);
                byte[] answer = MooncakeXferResponseCodec.encode(resp);
                answeredAt = clock.getAsLong(); // not after the answer leaves: the staleness rule counts from it
                WaveTrace.mark(WaveTrace.Point.P_REPLY_QUEUED);
                send(pull.reply, resp.status(), answer);
            }
            long answered = answeredAt;
            try {
                loop.execute(errors.guarded("sender loop", () -> {
                    shares.release(peer);
                    finishWave(pull, ready, errReqs, wErrMsg, status, ret, answered);
                }));
            } catch (RejectedExecutionException e) {
                LOG.debug("sender loop stopped; dropping the result of a transfer to {}", session);
            }
        };
        if (!shares.take(peer)) {
            LOG.debug("D {} already has {} transfer(s) on the pool (its share); queueing a wave", peer,
                    shares.inFlight(peer));
            shares.queue(peer, job);
            return;
        }
        WaveTrace.mark(WaveTrace.Point.P_WAVE_SUBMIT);
        shares.submit(peer, job, () -> finishWave(pull, ready, errReqs, wErrMsg, status, -1, NOT_ANSWERED));
    }

    private static int port(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /**
     * A kv_both worker: pulls that name this engine are its own receiver's (D's blocks live in this
     * engine too), so they are served. Call before the first pull.
     */
    public void acceptSelfAimedPulls() {
        selfAimedPullsAccepted = true;
    }

    /** Pulls (and writes) refused because their destination is P's own engine. */
    public long selfAimedRefusals() {
        return selfAimedRefusals.sum();
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

    /** D's answer to a wave whose write succeeded (any thread: reads only the wave's own lists). */
    static MooncakeXferResponse answer(List<Ready> ready, List<String> errReqs, String errMsg,
            MooncakeXferResponseStatus status) {
        Set<String> errSet = new HashSet<>(errReqs);
        List<String> ok = new ArrayList<>(ready.size());
        for (Ready r : ready) {
            if (!errSet.contains(r.dReqId())) {
                ok.add(r.dReqId());
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
    void finishWave(Pull pull, List<Ready> ready, List<String> errReqs, String errMsg,
            MooncakeXferResponseStatus status, int ret, long answeredAt) {
        pull.busy = false;
        Set<String> errSet = new HashSet<>(errReqs);
        List<String> ok = new ArrayList<>(ready.size());
        for (Ready r : ready) {
            if (!errSet.contains(r.dReqId())) {
                ok.add(r.dReqId());
            }
        }
        if (ret == SELF_AIMED) {
            selfAimedRefusals.increment();
            String why = String.format(Locale.ROOT, SelfTargets.MESSAGE, pull.peer);
            LOG.warn("Not writing {} request(s): {}", ok.size(), why);
            errMsg = errMsg == null ? why : errMsg + "; " + why;
            errReqs.addAll(ok);
            errSet.addAll(ok);
            ok.clear();
        } else if (ret == STALE || ret == ABANDONED) {
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
            SendBlockMeta sm = r.sendMeta();
            sm.sending--;
            if (errSet.contains(r.dReqId())) {
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
        for (String id : ok) {
            settle(pull, id, true, null, true);
        }
        for (String id : errReqs) {
            settle(pull, id, false, errMsg, true);
        }
        if (status == MooncakeXferResponseStatus.CONTINUE && !pull.done && nothingLeft(pull)) {
            // what this pull followed was answered while the wave ran: the FINISH is still owed
            send(pull.reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, null, null));
            end(pull);
        } else if (status == MooncakeXferResponseStatus.FINISH || pull.done) {
            end(pull);
        } else if (!pull.readyNow.isEmpty()) {
            scheduleWave(pull);
        } else {
            armTimeout(pull);
        }
    }

    /** Entries of {@code reqs_need_send} (loop thread). */
    public int pendingTransfers() {
        return reqsNeedSend.size();
    }

    /** Pulls being served (loop thread). */
    public int activePulls() {
        return activePulls.size();
    }

    public long errorReplies() {
        return errorReplies.sum();
    }

    public long placeholdersExpired() {
        return placeholdersExpired.sum();
    }

    /** Pulls refused with ERROR because a {@link SideChannelLimits} bound would have been exceeded. */
    public long limitRejections() {
        return limitRejections.sum();
    }

    /** Waves not written because they could not start within the staleness bound. */
    public long staleWaves() {
        return staleWaves.sum();
    }

    /** Waves that waited on the loop because their D already used its share of the transfer pool. */
    public long wavesQueuedForShare() {
        return shares.queuedTotal();
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
        return xferPool.writesIdle();
    }

    /** Stops the transfer pool; in-flight transfers are not cancelled (spec §15 #15), waited for briefly. */
    @Override
    public void close() {
        xferPool.close();
    }
}
