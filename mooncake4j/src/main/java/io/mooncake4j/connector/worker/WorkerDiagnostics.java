package io.mooncake4j.connector.worker;

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
 */
record WorkerDiagnostics(int pendingTransfers, int activeSends, long errorReplies, long placeholdersExpired,
        int activePulls, long dealerConnections, long handshakeRetries, long handshakeReconnects, long backgroundErrors,
        long limitRejections, long staleWaves, long wavesQueuedForShare, long reResolutions) {
}
