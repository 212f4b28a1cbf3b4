package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.connector.worker.plan.DescriptorBuffer;
import io.mooncake4j.connector.worker.plan.PlanErrors;
import io.mooncake4j.connector.worker.plan.ReadyRequest;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.send.Layerwise.Target;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The pulls P serves, once {@link KvSender} admitted them, and their waves (the rest of vLLM's
 * {@code send_kv_to_decode}): each pulled transfer's {@code ready} future posts back to the loop, ready
 * requests are planned into one wave, the wave's write goes to D's share of the transfer pool
 * ({@link PoolShares}, {@link BlockWriter}), and its result is booked and answered; a pull that waits
 * longer than the abort timeout gets vLLM's timeout answer; a pull's outcome is settled for the pulls D
 * sent again ({@link RetriedPulls}). It owns the set of pulls being served (read by
 * {@link LayerwisePush}), the buffer a wave is planned into and the plan's errors; each {@link Pull}'s own
 * fields are written here (and by the layer-wise push for its targets).
 *
 * <p><b>Threads.</b> Sender loop ({@code mooncake-p-sender-0}) only, except the job a wave submits: it
 * runs on a transfer-pool thread ({@code mooncake-p-xfer-<n>}), reads only the wave's own lists, answers D
 * when the write succeeded and posts the bookkeeping back to the loop.
 */
final class Waves {

    /** The send path's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    /** vLLM's timeout message, kept verbatim. */
    static final String READY_TIMEOUT_MESSAGE = "Timeout waiting for P side ready.";
    /** The error of a request that expired (or was removed) between readiness and sending (§15 #1 fixed). */
    static final String EXPIRED_BEFORE_SENDING = "Request expired before sending on P side.";

    /** A ready request of a wave, as the planner sees it. */
    record Ready(String dReqId, SendBlockMeta sendMeta, int[][] remoteBlockIds) implements ReadyRequest {
        @Override
        public int[][] localBlockIds() {
            return sendMeta.localBlockIds;
        }
    }

    private final ScheduledExecutorService loop;
    private final BackgroundErrors errors;
    private final LongSupplier clock;
    private final long abortNanos;
    private final int localPpSize;
    private final TransferPlanner planner;
    private final PendingSends pending;
    private final PendingLimits pendingLimits;
    private final RetriedPulls retried;
    private final PoolShares shares;
    private final BlockWriter writer;
    private final Replies replies;

    // sender-loop state
    /** The pulls being served. */
    private final Set<Pull> activePulls = new HashSet<>();
    /** The scratch buffer a wave is planned into. */
    private final DescriptorBuffer buf = new DescriptorBuffer(1024);
    private final PlanErrors planErrors = new PlanErrors();

    Waves(ScheduledExecutorService loop, BackgroundErrors errors, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, PendingSends pending, PendingLimits pendingLimits, RetriedPulls retried,
            PoolShares shares, BlockWriter writer, Replies replies) {
        this.loop = loop;
        this.errors = errors;
        this.clock = clock;
        this.abortNanos = abortNanos;
        this.localPpSize = localPpSize;
        this.planner = planner;
        this.pending = pending;
        this.pendingLimits = pendingLimits;
        this.retried = retried;
        this.shares = shares;
        this.writer = writer;
        this.replies = replies;
    }

    /** The pulls being served, read only (sender loop). */
    Collection<Pull> activePulls() {
        return Collections.unmodifiableSet(activePulls);
    }

    /** Pulls being served (sender loop). */
    int activeCount() {
        return activePulls.size();
    }

    /** {@code pull} is served from now on: what it waits for is counted against the limits. */
    void admit(Pull pull) {
        activePulls.add(pull);
        pendingLimits.pend(pull.peer, pull.pending.size() + pull.followed.size(), pull.bytes);
    }

    /** Waits (without blocking the loop) for the transfers {@code pull} waits for, within the abort timeout. */
    void awaitReady(Pull pull) {
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
        Replies.send(pull.reply,
                MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, ids, READY_TIMEOUT_MESSAGE));
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
            settle(pull, id, false, BlockWriter.ABANDONED_MESSAGE, false); // not answered: a re-send is served afresh
        }
        if (activePulls.contains(pull)) {
            pendingLimits.unpendAll(pull.peer, pull.pending.size() + pull.followed.size(), pull.bytes);
        }
        pull.pending.clear();
        pull.followed.clear(); // its followings are dropped when the first pulls settle
        pull.readyNow.clear();
        activePulls.remove(pull);
    }

    String retryKey(Pull pull, String dReqId) {
        return RetriedPulls.key(pull.peer, dReqId, pull.meta.reqBlocks().get(dReqId).transferId());
    }

    /**
     * {@code pull}'s answer for {@code dReqId} is final: remembered for a re-send ({@code remember} false
     * when nothing was answered: the pull was abandoned), and every re-sent pull that followed it hears it.
     */
    void settle(Pull pull, String dReqId, boolean ok, String errMsg, boolean remember) {
        long now = clock.getAsLong();
        if (ok) {
            retried.transferFinished(pull.meta.reqBlocks().get(dReqId).transferId(), now);
        }
        List<Pull> followers = retried.settle(retryKey(pull, dReqId), pull, ok, errMsg, remember, now);
        if (followers == null) {
            return;
        }
        for (Pull f : followers) {
            if (!f.done && f.followed.remove(dReqId)) {
                pendingLimits.unpend(f.peer, 1);
                answerFollower(f, dReqId, ok, remember ? errMsg : BlockWriter.ABANDONED_MESSAGE);
            }
        }
    }

    /** A re-sent pull hears the outcome of one of its requests that another pull served. */
    void answerFollower(Pull f, String dReqId, boolean ok, String errMsg) {
        boolean last = nothingLeft(f);
        Replies.send(f.reply, MooncakeXferResponse.of(last ? MooncakeXferResponseStatus.FINISH
                : MooncakeXferResponseStatus.CONTINUE, ok ? List.of(dReqId) : null, ok ? null : List.of(dReqId),
                ok ? null : errMsg));
        f.lastContact = clock.getAsLong();
        if (last) {
            end(f);
        }
    }

    /** Nothing of {@code pull} waits, is planned or is being written: its next answer is its last. */
    static boolean nothingLeft(Pull pull) {
        return pull.pending.isEmpty() && pull.followed.isEmpty() && pull.readyNow.isEmpty() && !pull.busy
                && pull.lwInflight == 0;
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
            if (pending.isCurrent(sm)) {
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
            replies.replyError(pull.reply, e.getMessage());
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
            int ret = writer.write(pull, contact, session, src, dst, len, bytes);
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
                Replies.send(pull.reply, resp.status(), answer);
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
        if (ret == BlockWriter.SELF_AIMED) {
            writer.selfAimedRefused();
            String why = String.format(Locale.ROOT, SelfTargets.MESSAGE, pull.peer);
            LOG.warn("Not writing {} request(s): {}", ok.size(), why);
            errMsg = errMsg == null ? why : errMsg + "; " + why;
            errReqs.addAll(ok);
            errSet.addAll(ok);
            ok.clear();
        } else if (ret == BlockWriter.STALE || ret == BlockWriter.ABANDONED) {
            writer.staleWave();
            String why = ret == BlockWriter.STALE ? BlockWriter.STALE_WAVE_MESSAGE : BlockWriter.ABANDONED_MESSAGE;
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
            } else if (sm.sent == sm.needSend && pending.remove(sm)) {
                pending.markFinishedSending(sm.pReqId);
            }
        }
        if (answeredAt == NOT_ANSWERED) {
            WaveTrace.mark(WaveTrace.Point.P_REPLY_QUEUED);
            Replies.send(pull.reply, MooncakeXferResponse.of(status, ok, errReqs, errMsg));
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
            Replies.send(pull.reply, MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, null, null));
            end(pull);
        } else if (status == MooncakeXferResponseStatus.FINISH || pull.done) {
            end(pull);
        } else if (!pull.readyNow.isEmpty()) {
            scheduleWave(pull);
        } else {
            armTimeout(pull);
        }
    }

    /** Ends every pull being served, without answering (sender loop); see {@link KvSender#abandonAllPulls}. */
    void abandonAll(String reason) {
            if (!activePulls.isEmpty()) {
                LOG.warn("Abandoning {} side-channel pull(s): {}", activePulls.size(), reason);
            }
            for (Pull pull : new ArrayList<>(activePulls)) {
                end(pull);
            }
    }
}
