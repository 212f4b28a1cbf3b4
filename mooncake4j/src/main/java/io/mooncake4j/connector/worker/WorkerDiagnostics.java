package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.connector.worker.send.KvSender;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeoutException;
import org.slf4j.LoggerFactory;

/**
 * A snapshot of the worker's side-channel state, for tests and diagnostics. Immutable.
 *
 * @param pendingTransfers     entries of P's {@code reqs_need_send} (placeholders included); -1 without a sender
 * @param activeSends          D pulls P is serving now; -1 without a sender
 * @param errorReplies         {@code ERROR} responses P sent (malformed or rejected pulls)
 * @param placeholdersExpired  placeholders of early D pulls that P dropped (spec §15 #3 fixed)
 * @param activePulls          D's DEALER requests now open
 * @param dealerConnections    DEALER connections D opened (reused ones counted once, retries included)
 * @param handshakeRetries     DEALER connections replaced after a ZMTP handshake that failed or timed out
 * @param handshakeReconnects  connections dropped before their handshake and made again
 * @param backgroundErrors     exceptions of background work so far (each logged)
 * @param limitRejections      pulls P refused with ERROR because a {@link SideChannelLimits} bound was reached
 * @param staleWaves           waves P did not write because they could not start within the abort timeout of
 *                             its last contact with D (no write after abandonment)
 * @param wavesQueuedForShare  waves that waited because their D already used its share of P's transfer pool
 * @param reResolutions        cached remote engines D dropped (lost connection, new bootstrap URL, missing rank)
 * @param selfAimedRefusals    pulls (or writes) P refused because their destination is P's own engine
 * @param pullsResent          D requests sent again on a new connection after the one they went out on was lost
 * @param retriesFollowed      requests of re-sent pulls P let wait for the first pull's outcome (one write)
 * @param retriesAnsweredAgain requests of re-sent pulls P answered again from the outcome it remembered
 * @param retriesForgotten     requests of re-sent pulls whose transfer P had finished and whose outcome it no
 *                             longer knew (answered with an error, not written again)
 */
record WorkerDiagnostics(int pendingTransfers, int activeSends, long errorReplies, long placeholdersExpired,
        int activePulls, long dealerConnections, long handshakeRetries, long handshakeReconnects, long backgroundErrors,
        long limitRejections, long staleWaves, long wavesQueuedForShare, long reResolutions,
        long selfAimedRefusals, long pullsResent, long retriesFollowed, long retriesAnsweredAgain,
        long retriesForgotten) {

    /**
     * Reads the counters of {@code s} and {@code r} (either may be null) and asks their loops for
     * the state only they may read (the sender loop {@code sl}, the receiver loop), each within the
     * loop-call timeout.
     */
    static WorkerDiagnostics of(KvSender s, Executor sl, KvReceiver r, BackgroundErrors backgroundErrors,
            LoopCalls loopCalls) {
        int pending = -1;
        int activePulls = -1;
        long errorReplies = 0;
        long placeholders = 0;
        long limitRejections = 0;
        long staleWaves = 0;
        long queuedForShare = 0;
        long selfAimed = 0;
        if (s != null && sl != null) {
            try {
                int[] v = loopCalls.await(CompletableFuture.supplyAsync(
                        () -> new int[] {s.pendingTransfers(), s.activePulls()}, sl));
                pending = v[0];
                activePulls = v[1];
            } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
                LoggerFactory.getLogger(WorkerDiagnostics.class).debug("diagnostics: sender loop did not answer", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            errorReplies = s.errorReplies();
            placeholders = s.placeholdersExpired();
            limitRejections = s.limitRejections();
            staleWaves = s.staleWaves();
            queuedForShare = s.wavesQueuedForShare();
            selfAimed = s.selfAimedRefusals();
        }
        long retries = r == null ? 0 : r.channels().handshakeRetries();
        long connections = r == null ? 0 : r.channels().connectionsOpened();
        long reconnects = r == null ? 0 : r.channels().handshakeReconnects();
        int dealers = r == null ? 0 : r.channels().activePulls();
        long reResolutions = 0;
        if (r != null) {
            try {
                reResolutions = loopCalls.await(CompletableFuture.supplyAsync(r::reResolutions, r.loop()));
            } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
                LoggerFactory.getLogger(WorkerDiagnostics.class).debug("diagnostics: receiver loop did not answer", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return new WorkerDiagnostics(pending, activePulls, errorReplies, placeholders, dealers, connections, retries,
                reconnects, backgroundErrors.count(), limitRejections, staleWaves, queuedForShare, reResolutions,
                selfAimed, r == null ? 0 : r.channels().pullsResent(), s == null ? 0 : s.retriesFollowed(),
                s == null ? 0 : s.retriesAnsweredAgain(), s == null ? 0 : s.retriesForgotten());
    }
}
