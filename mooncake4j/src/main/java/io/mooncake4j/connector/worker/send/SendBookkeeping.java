package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.connector.worker.SideChannelLimits;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.engine.TransferEngine;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.ToIntFunction;

/**
 * The bookkeeping of P's holds: vLLM's {@code record_send_reqs} and {@code fetch_finished_sending_reqs},
 * the expiry of holds and of placeholders, and the one timer that tells the worker an expiry is due.
 * Sender loop only.
 */
abstract class SendBookkeeping extends LayerwisePush {

    // the holds' state: sender loop only unless a comment says otherwise
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
    final ExpiryQueue<SendBlockMeta> placeholderExpiry = new ExpiryQueue<>(
            (sm, at) -> reqsNeedSend.get(sm.transferId) == sm && sm.isPlaceholder());

    SendBookkeeping(String engineLabel, TransferEngine engine, MooncakeKvConnectorStats stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, SideChannelLimits limits, boolean layerwise,
            int transferThreadNice) {
        super(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, layerwise, transferThreadNice);
    }

    // ------------------------------------------------------------------------------ bookkeeping

    /** vLLM's {@code record_send_reqs}, with §15 #2 fixed: unknown transfer ids never throw. */
    public void recordSendReqs(MooncakeConnectorMetadata metadata) {
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
                    pendingLimits.placeholderGone();
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
                    pendingLimits.placeholderGone();
                }
            }
        }
        for (String transferId : metadata.reqsNotProcessed()) {
            SendBlockMeta sm = reqsNeedSend.remove(transferId);
            if (sm != null && sm.isPlaceholder()) {
                pendingLimits.placeholderGone();
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
    public void onFinished(Runnable r) {
        onFinished = java.util.Objects.requireNonNull(r, "r");
    }

    void markFinishedSending(String pReqId) {
        finishedSendingReqs.add(pReqId);
        onFinished.run();
    }

    /**
     * Arms one timer on the sender loop for the earliest expiry deadline {@code at} (loop thread).
     * Expiry is done by {@link #fetchFinishedSending}; this timer only tells the listener that a fetch
     * would now find an expired hold. One timer at a time: the next deadline ({@link #holdExpiry}) is
     * armed when it fires, so P holds no timer per request and a tick costs what is due, not a scan.
     */
    void armExpiryWake(long at) {
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

    void onExpiryWake() {
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
    public Set<String> fetchFinishedSending() {
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
            pendingLimits.placeholderGone();
            reqsNeedSend.remove(sm.transferId, sm);
            return true;
        });
        return out;
    }

    // ------------------------------------------------------------------------------ re-sent pulls

    /** Ends a pull being served (KvSender). */
    abstract void end(Pull pull);

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
                answerFollower(f, dReqId, ok, remember ? errMsg : ABANDONED_MESSAGE);
            }
        }
    }

    /** A re-sent pull hears the outcome of one of its requests that another pull served. */
    void answerFollower(Pull f, String dReqId, boolean ok, String errMsg) {
        boolean last = nothingLeft(f);
        KvSender.send(f.reply, MooncakeXferResponse.of(last ? MooncakeXferResponseStatus.FINISH
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

    /** Requests of re-sent pulls that waited for the first pull's outcome (never written twice). */
    public long retriesFollowed() {
        return retried.followedCount.sum();
    }

    /** Requests of re-sent pulls answered again from the outcome P remembered. */
    public long retriesAnsweredAgain() {
        return retried.answeredAgainCount.sum();
    }

    /** Requests of re-sent pulls whose transfer had finished and whose outcome P no longer knew (ERROR). */
    public long retriesForgotten() {
        return retried.forgottenCount.sum();
    }

    /** Entries held by the two expiry queues, dead ones not yet dropped included (tests: they stay bounded). */
    public int expiryEntries() {
        return holdExpiry.size() + placeholderExpiry.size();
    }
}
