package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.wire.ProtocolException;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.TransferRecorder;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferPlanningException;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import io.mooncake4j.connector.worker.send.PreparedShapes.Prepared;
import io.mooncake4j.engine.TransferEngine;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
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
 * The producer's send path (vLLM's {@code send_kv_to_decode}, {@code record_send_reqs},
 * {@code fetch_finished_sending_reqs} and {@code _send_blocks}, spec §6.7–§6.12), as a
 * {@link SideChannelHandler}.
 *
 * <p><b>Parts.</b> This class admits D's pulls (the side channel: refusals, limits, re-sends, the
 * placeholder of an early pull) and hands the rest to the parts it composes, each the one owner of its
 * state and passed its collaborators at construction: {@link PendingSends} ({@code reqs_need_send}, the
 * holds, their expiry, the finished set), {@link Waves} (the pulls being served and their waves),
 * {@link LayerwisePush} (layer-wise writes and the model runner's queue), {@link BlockWriter} (the
 * write into D's blocks and its checks), {@link Replies} (answers to D), and {@link TransferPool},
 * {@link PoolShares}, {@link PendingLimits}, {@link PreparedShapes}, {@link RetriedPulls}.
 *
 * <p><b>Threads.</b> Every method runs on the sender loop ({@code mooncake-p-sender-0}), which owns
 * all of the parts' loop state, except {@link #offerFromModelRunner} (the model runner's thread), the
 * counters, {@link #abandonAllPulls}, {@link #writesIdle} and {@link #close} (any thread: the ROUTER's
 * reset, shutdown). Waiting for readiness never blocks the loop: each pulled transfer has a
 * {@code ready} future whose completion posts back to the loop, and each wave arms one scheduled
 * timeout of the abort timeout. A ready wave's descriptors go to the transfer pool
 * ({@code mooncake-p-xfer-<n>}, {@code num_workers} threads), which runs the blocking
 * {@code batchTransferSyncWrite}, answers D itself when the write succeeded (the answer was fixed
 * when the wave was planned; the {@link ReplySink} is thread-safe) and posts the result back to
 * the loop, which does the bookkeeping (and answers D for a failed write).
 *
 * <p><b>Bounds.</b> A pull is refused with an {@code ERROR} response, before anything is
 * created for it, when it would make P hold more pending transfer ids (or metadata bytes) for its D
 * than {@link ChannelLimits#maxPendingPerPeer()} allows, more over all peers than
 * {@link ChannelLimits#maxPendingTotal()}, or more placeholders than that total. One D (keyed by
 * its {@code remote_hostname:remote_port}) occupies at most
 * {@link ChannelLimits#transfersPerPeer} transfer-pool threads; its further waves wait on the
 * loop, so a D that stops reading cannot starve the others.
 *
 * <p><b>No write after abandonment.</b> A wave is written only if its transfer starts within the
 * abort timeout of P's last contact with D on that pull (the request's arrival or P's last response).
 * D's receive deadline is the abort timeout plus a margin (vLLM: 60 s) after the last response it
 * received, so a write that starts by then has that margin to finish before D may declare the load
 * failed. A wave that missed it is not written; its requests are reported in {@code err_reqs} with
 * {@link BlockWriter#STALE_WAVE_MESSAGE}.
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
public final class KvSender implements SideChannelHandler, Quiesce, AutoCloseable {

    /** The send path's log category (its parts log here too). */
    static final Logger LOG = LoggerFactory.getLogger(KvSender.class);

    /** vLLM's timeout message, kept verbatim. */
    public static final String READY_TIMEOUT_MESSAGE = Waves.READY_TIMEOUT_MESSAGE;
    /** The error of a request that expired (or was removed) between readiness and sending (§15 #1 fixed). */
    public static final String EXPIRED_BEFORE_SENDING = Waves.EXPIRED_BEFORE_SENDING;

    // collaborators and configuration (fixed at construction); each part owns its state (see its class)
    private final ScheduledExecutorService loop;
    private final BackgroundErrors errors;
    private final LongSupplier clock;
    private final TransferTopology topology;
    /** The transfer threads (they own themselves). */
    private final TransferPool xferPool;
    /** Each D's share of {@link #xferPool} (sender loop). */
    private final PoolShares shares;
    /** The writes into D's blocks, the self targets, the self-aimed and stale counts (transfer pool). */
    private final BlockWriter writer;
    /** The region pairs prepared per shape of D (sender loop). */
    private final PreparedShapes preparedShapes;
    /** What the pulls hold against the limits (sender loop). */
    private final PendingLimits pendingLimits;
    /** D requests served or answered lately, so that a re-sent pull is never written twice (sender loop). */
    private final RetriedPulls retried;
    /** The transfers to send and their holds ({@code reqs_need_send}; sender loop). */
    private final PendingSends pending;
    /** The answers to D, the ERROR count and the rejections logged (any thread). */
    private final Replies replies;
    /** The pulls being served and their waves (sender loop). */
    private final Waves waves;
    /** Layer-wise push (sender loop, and the model runner's queue). */
    private final LayerwisePush layerwise;

    /** Pulls refused with ERROR because a limit would have been exceeded (sender loop writes, any thread reads). */
    private final LongAdder limitRejections = new LongAdder();
    /** What this P's KV blocks mean, or null: a pull naming another layout is refused. */
    private volatile String kvLayout;

    public KvSender(String engineLabel, TransferEngine engine, TransferRecorder stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, ChannelLimits limits) {
        this(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, false);
    }

    public KvSender(String engineLabel, TransferEngine engine, TransferRecorder stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, ChannelLimits limits, boolean layerwise) {
        this(engineLabel, engine, stats, errors, loop, numWorkers, clock, abortNanos, localPpSize, planner,
                localRegions, groupOfLayer, layoutOfLayer, limits, layerwise, 0);
    }

    /**
     * As above; {@code transferThreadNice > 0} makes each transfer thread set that nice value when it
     * starts (and so the engine threads it starts: Linux threads inherit it), warned once where the
     * system refuses.
     */
    public KvSender(String engineLabel, TransferEngine engine, TransferRecorder stats, BackgroundErrors errors,
            ScheduledExecutorService loop, int numWorkers, LongSupplier clock, long abortNanos, int localPpSize,
            TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, ChannelLimits limits, boolean layerwise,
            int transferThreadNice) {
        this.loop = loop;
        this.errors = errors;
        this.clock = clock;
        this.topology = planner.topology();
        List<TransferRegion> regions = List.copyOf(localRegions);
        this.xferPool = new TransferPool(engineLabel, numWorkers, transferThreadNice);
        this.shares = new PoolShares(xferPool, limits.transfersPerPeer(numWorkers));
        this.writer = new BlockWriter(engine, stats, errors, xferPool, clock, abortNanos);
        this.preparedShapes = new PreparedShapes(planner, regions, groupOfLayer, layoutOfLayer, localPpSize);
        this.pendingLimits = new PendingLimits(limits);
        this.retried = new RetriedPulls(abortNanos, limits.maxPendingTotal());
        this.pending = new PendingSends(engineLabel, stats, errors, loop, clock, abortNanos, pendingLimits);
        this.replies = new Replies();
        this.waves = new Waves(loop, errors, clock, abortNanos, localPpSize, planner, pending, pendingLimits, retried,
                shares, writer, replies);
        this.layerwise = new LayerwisePush(layerwise, regions, planner, pending, waves.activePulls(), shares, writer,
                errors, loop, waves::scheduleWave);
    }

    /**
     * Sets this P's KV layout (before pulls arrive): a pull whose {@code mooncake4j_kv_layout} differs is refused
     * with an {@code ERROR} answer naming both, before anything is written; a pull without one (a vLLM D) is served.
     *
     * @param layout the layout, or null to compare nothing
     */
    public void kvLayout(String layout) {
        this.kvLayout = layout;
    }

    // ------------------------------------------------------------------------------ the model runner's calls

    /**
     * Hands a task of the model runner's thread to the sender loop (see
     * {@link LayerwisePush#offerFromModelRunner}): a layer hook ({@code mustWake} false) or the step's
     * metadata ({@link #recordSendReqs}, true), run on the loop in call order.
     */
    public void offerFromModelRunner(Runnable task, boolean mustWake) {
        layerwise.offerFromModelRunner(task, mustWake);
    }

    /** Tasks handed to the sender loop to run the model runner's queue (diagnostics and tests). */
    public long layerHookWakeups() {
        return layerwise.layerHookWakeups();
    }

    /** vLLM's {@code save_kv_layer}: layer {@code layerName} of this step's chunks is written (sender loop). */
    public void onLayerSaved(String layerName) {
        layerwise.onLayerSaved(layerName);
    }

    /** vLLM's {@code wait_for_save}: the forward pass ended; layers not saved yet go now (sender loop). */
    public void onForwardDone() {
        layerwise.onForwardDone();
    }

    /** vLLM's {@code record_send_reqs}, with §15 #2 fixed: unknown transfer ids never throw (sender loop). */
    public void recordSendReqs(MooncakeConnectorMetadata metadata) {
        pending.record(metadata, layerwise::closeLayerwise);
        layerwise.recordChunks(metadata.layerwiseChunks());
    }

    /**
     * Sets what runs (sender loop) when {@link #fetchFinishedSending} has something new: an id was
     * queued as finished, or a recorded request's hold expired; it must not throw (the worker guards it).
     */
    public void onFinished(Runnable r) {
        pending.onFinished(r);
    }

    /**
     * vLLM's {@code fetch_finished_sending_reqs} with expiry (§6.12); placeholders expire too (§15 #3
     * fixed). Runs the model runner's queued calls first (sender loop).
     */
    public Set<String> fetchFinishedSending() {
        layerwise.runLayerHooks();
        return pending.fetchFinished();
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
            replies.logRejected(e.getMessage());
            replies.replyError(reply, e.getMessage());
        } catch (RuntimeException e) {
            errors.report("sender loop", e);
            replies.replyError(reply, "Error processing Mooncake xfer request: " + e);
        }
    }

    void sendKvToDecode(byte[] identity, ReplySink reply, MooncakeXferMetadata meta, long bytes) {
        String peer = meta.remoteHostname() + ":" + meta.remotePort();
        String self = writer.selfRefusal(meta.remoteHostname(), meta.remotePort());
        if (self != null) {
            writer.selfAimedRefused();
            replies.logRejected("a pull aimed at this P worker's own engine was refused (ERROR answer)");
            LOG.debug("{}", self);
            replies.replyError(reply, self);
            return;
        }
        String limit = pendingLimits.limitError(peer, meta, bytes, pending::containsKey);
        if (limit != null) {
            limitRejections.increment();
            replies.logRejected("P side-channel limit exceeded (pending transfers, placeholders or metadata bytes); "
                    + "the pull got an ERROR response");
            LOG.debug("{}", limit);
            replies.replyError(reply, limit);
            return;
        }
        String ours = kvLayout;
        if (ours != null && meta.kvLayout() != null && !ours.equals(meta.kvLayout())) {
            String msg = String.format(Locale.ROOT, "KV layout mismatch: this prefill node's KV layout %s differs from "
                    + "the decode node's %s; nothing was transferred; pair nodes that serve the same checkpoint", ours,
                    meta.kvLayout());
            replies.logRejected("a pull of another KV layout was refused (ERROR answer)");
            LOG.debug("{}", msg);
            replies.replyError(reply, msg);
            return;
        }
        String pairing = topology.pairingError(meta.remoteTpRank(), meta.remoteTpSize());
        if (pairing != null) {
            replies.logRejected(pairing);
            replies.replyError(reply, pairing);
            return;
        }
        Prepared cached = preparedShapes.prepared(meta);
        PreparedRegions prepared = cached.regions;
        WaveTrace.mark(WaveTrace.Point.P_PREPARED);
        if (!prepared.ok()) {
            replies.logRejected(prepared.error());
            replies.replyError(reply, prepared.error());
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
            SendBlockMeta sm = pending.get(transferId);
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
                sm = pending.addPlaceholder(transferId, now);
            }
            if (pull.pending.put(e.getKey(), sm) == null) {
                sm.waiters++;
            }
        }

        if (pull.pending.isEmpty() && pull.followed.isEmpty()) {
            Replies.send(reply,
                    MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, knownOk, knownErr, knownMsg));
            return;
        }
        if (!knownOk.isEmpty() || !knownErr.isEmpty()) {
            Replies.send(reply,
                    MooncakeXferResponse.of(MooncakeXferResponseStatus.CONTINUE, knownOk, knownErr, knownMsg));
        }
        waves.admit(pull);
        if (layerwise.enabled()) {
            for (Map.Entry<String, SendBlockMeta> e : pull.pending.entrySet()) {
                if (e.getValue().layerwise != null) {
                    layerwise.addTarget(pull, e.getKey(), e.getValue());
                }
            }
        }
        waves.awaitReady(pull);
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

    // ------------------------------------------------------------------------------ re-sent pulls

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

    /**
     * A kv_both worker: pulls that name this engine are its own receiver's (D's blocks live in this
     * engine too), so they are served. Call before the first pull.
     */
    public void acceptSelfAimedPulls() {
        writer.acceptSelfAimedPulls();
    }

    /** Pulls (and writes) refused because their destination is P's own engine. */
    public long selfAimedRefusals() {
        return writer.selfAimedRefusals();
    }

    /** Entries held by the two expiry queues, dead ones not yet dropped included (tests: they stay bounded). */
    public int expiryEntries() {
        return pending.expiryEntries();
    }

    /** Entries of {@code reqs_need_send} (loop thread). */
    public int pendingTransfers() {
        return pending.size();
    }

    /** Pulls being served (loop thread). */
    public int activePulls() {
        return waves.activeCount();
    }

    public long errorReplies() {
        return replies.errorReplies();
    }

    public long placeholdersExpired() {
        return pending.placeholdersExpired();
    }

    /** Pulls refused with ERROR because a {@link ChannelLimits} bound would have been exceeded. */
    public long limitRejections() {
        return limitRejections.sum();
    }

    /** Waves not written because they could not start within the staleness bound. */
    public long staleWaves() {
        return writer.staleWaves();
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
        return java.util.concurrent.CompletableFuture.runAsync(() -> waves.abandonAll(reason), loop);
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
