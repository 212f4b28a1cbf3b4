package io.mooncake4j.engine;

/**
 * What an engine refused, dropped or rerouted on its own, as cumulative counts since it was
 * created: the refusals a peer can provoke and the limits it hit, which the engine otherwise only
 * logs (and, after the first few, at DEBUG). Read through {@link TransferEngine#counters()};
 * {@code io.mooncake4j.metrics.MeteredTransferEngine} exposes them as meters. A value never
 * decreases and is 0 where the engine does not count it. Immutable.
 *
 * @param rejectedDataRequests   requests from peers the TCP data port rejected (outside registered
 *                               memory, bad opcode)
 * @param idleClosedDataSessions TCP data-port connections closed because they were idle past
 *                               {@code MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC}, or the oldest idle one
 *                               closed to make room at {@code MOONCAKE4J_TCP_DATA_MAX_CONNECTIONS}
 * @param rejectedHandshakes     handshake (RPC port) connections dropped for malformed input
 * @param evictedHandshakes      handshake connections closed to make room for a newer one at
 *                               {@code MOONCAKE4J_HANDSHAKE_MAX_CONNECTIONS}
 * @param expiredHandshakes      handshake connections closed at
 *                               {@code MOONCAKE4J_HANDSHAKE_REQUEST_TIMEOUT_MS}
 * @param segmentLimitHits       {@code openSegment} calls refused because
 *                               {@code MOONCAKE4J_TCP_MAX_SEGMENTS} names were already open
 * @param peerLimitHits          TCP peer connections not opened because
 *                               {@code MOONCAKE4J_TCP_MAX_PEERS} peers were in use, none idle (their
 *                               transfers fail)
 * @param fallbackSlices         slices moved to another transport after a retryable failure
 * @param unroutableSlices       slices failed because no installed transport reaches the peer's
 *                               buffer from the local memory
 */
public record EngineCounters(
        long rejectedDataRequests,
        long idleClosedDataSessions,
        long rejectedHandshakes,
        long evictedHandshakes,
        long expiredHandshakes,
        long segmentLimitHits,
        long peerLimitHits,
        long fallbackSlices,
        long unroutableSlices) {

    /** All zero: what an engine that counts nothing reports. */
    public static final EngineCounters NONE = new EngineCounters(0, 0, 0, 0, 0, 0, 0, 0, 0);

    /**
     * Adds two sets of counts, field by field (an engine summing over its parts).
     *
     * @param o the counts to add
     * @return the sums
     */
    public EngineCounters plus(EngineCounters o) {
        return new EngineCounters(rejectedDataRequests + o.rejectedDataRequests,
                idleClosedDataSessions + o.idleClosedDataSessions,
                rejectedHandshakes + o.rejectedHandshakes,
                evictedHandshakes + o.evictedHandshakes,
                expiredHandshakes + o.expiredHandshakes,
                segmentLimitHits + o.segmentLimitHits,
                peerLimitHits + o.peerLimitHits,
                fallbackSlices + o.fallbackSlices,
                unroutableSlices + o.unroutableSlices);
    }
}
