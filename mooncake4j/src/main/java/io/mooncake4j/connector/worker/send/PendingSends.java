package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.TransferRecorder;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiConsumer;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The transfers P holds for D to pull (vLLM's {@code reqs_need_send}, one {@link SendBlockMeta} per
 * transfer id, placeholders of early D pulls included) and their bookkeeping: vLLM's
 * {@code record_send_reqs} and {@code fetch_finished_sending_reqs}, the finished set, the expiry of holds
 * and of placeholders, the one timer that tells the worker an expiry is due, and the count of expired
 * placeholders.
 *
 * <p><b>Threads.</b> Sender loop ({@code mooncake-p-sender-0}) only, except {@link #onFinished(Runnable)}
 * (any thread, before the first pull) and {@link #placeholdersExpired()} (any thread).
 */
final class PendingSends {

    /** The send path's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    private final String engineLabel;
    private final TransferRecorder stats;
    private final BackgroundErrors errors;
    private final ScheduledExecutorService loop;
    private final LongSupplier clock;
    private final long abortNanos;
    /** What the placeholders hold against the limits (shared with the side channel's admission). */
    private final PendingLimits pendingLimits;

    /** vLLM's {@code reqs_need_send}: transfer id → what P holds for it. */
    private final Map<String, SendBlockMeta> reqsNeedSend = new LinkedHashMap<>();
    private Set<String> finishedSendingReqs = new LinkedHashSet<>();
    /** Run on the sender loop after {@code finishedSendingReqs} gained an id or a hold expired; never throws. */
    private volatile Runnable onFinished = () -> { };
    /** The armed expiry wake-up ({@link #armExpiryWake}) and its deadline on {@code clock}. */
    private ScheduledFuture<?> expiryWake;
    private long expiryWakeAt;
    /** Expiry deadlines of the recorded holds ({@code request_finished} + abort timeout), earliest first. */
    private final ExpiryQueue<SendBlockMeta> holdExpiry = new ExpiryQueue<>(
            (sm, at) -> reqsNeedSend.get(sm.transferId) == sm && !sm.isPlaceholder() && sm.expireNanos == at);
    /** Expiry deadlines of the placeholders of early D pulls (creation + abort timeout), earliest first. */
    private final ExpiryQueue<SendBlockMeta> placeholderExpiry = new ExpiryQueue<>(
            (sm, at) -> reqsNeedSend.get(sm.transferId) == sm && sm.isPlaceholder());
    private final LongAdder placeholdersExpired = new LongAdder();

    PendingSends(String engineLabel, TransferRecorder stats, BackgroundErrors errors,
            ScheduledExecutorService loop, LongSupplier clock, long abortNanos, PendingLimits pendingLimits) {
        this.engineLabel = engineLabel;
        this.stats = stats;
        this.errors = errors;
        this.loop = loop;
        this.clock = clock;
        this.abortNanos = abortNanos;
        this.pendingLimits = pendingLimits;
    }

    // ------------------------------------------------------------------------------ the transfers

    /** The hold of {@code transferId}, or null. */
    SendBlockMeta get(String transferId) {
        return reqsNeedSend.get(transferId);
    }

    boolean containsKey(String transferId) {
        return reqsNeedSend.containsKey(transferId);
    }

    /** {@code sm} is still the hold of its transfer (it neither expired nor was replaced). */
    boolean isCurrent(SendBlockMeta sm) {
        return reqsNeedSend.get(sm.transferId) == sm;
    }

    /** Removes {@code sm} if it is still its transfer's hold; whether it was. */
    boolean remove(SendBlockMeta sm) {
        return reqsNeedSend.remove(sm.transferId, sm);
    }

    /** Entries of {@code reqs_need_send}. */
    int size() {
        return reqsNeedSend.size();
    }

    /** A D pull of {@code transferId} arrived before P's scheduler: a placeholder, expired if P never records it. */
    SendBlockMeta addPlaceholder(String transferId, long now) {
        SendBlockMeta sm = new SendBlockMeta("", transferId, new int[0][], now);
        reqsNeedSend.put(transferId, sm);
        pendingLimits.placeholderAdded();
        placeholderExpiry.add(now + abortNanos, sm, reqsNeedSend.size());
        return sm;
    }

    // ------------------------------------------------------------------------------ bookkeeping

    /**
     * vLLM's {@code record_send_reqs} (without the layer-wise chunks), with §15 #2 fixed: unknown transfer
     * ids never throw. {@code beforeReady} runs for a hold whose blocks became known just before its
     * {@code ready} future completes (the layer-wise push closes what it had not pushed).
     */
    void record(MooncakeConnectorMetadata metadata, BiConsumer<SendBlockMeta, int[][]> beforeReady) {
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
                beforeReady.accept(sm, blockIds);
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
    }

    /**
     * Sets what runs (sender loop) when {@link #fetchFinished} has something new: an id was queued as
     * finished, or a recorded request's hold expired; it must not throw (the worker guards it).
     */
    void onFinished(Runnable r) {
        onFinished = Objects.requireNonNull(r, "r");
    }

    void markFinishedSending(String pReqId) {
        finishedSendingReqs.add(pReqId);
        onFinished.run();
    }

    /**
     * Arms one timer on the sender loop for the earliest expiry deadline {@code at} (loop thread).
     * Expiry is done by {@link #fetchFinished}; this timer only tells the listener that a fetch
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
        // 1 ms past the deadline, so that fetchFinished's strict test holds when it runs
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

    /**
     * vLLM's {@code fetch_finished_sending_reqs} with expiry (§6.12); placeholders expire too (§15 #3
     * fixed). The caller runs the model runner's queued calls first.
     */
    Set<String> fetchFinished() {
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

    /** Placeholders of early D pulls dropped because P never scheduled their transfer (any thread). */
    long placeholdersExpired() {
        return placeholdersExpired.sum();
    }

    /** Entries held by the two expiry queues, dead ones not yet dropped included (tests: they stay bounded). */
    int expiryEntries() {
        return holdExpiry.size() + placeholderExpiry.size();
    }
}
