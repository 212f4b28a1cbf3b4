package io.mooncake4j.connector.worker;

/**
 * Cumulative counters of one worker's side channel since it started, for monitoring (the
 * {@code io.mooncake4j.metrics} binder exports them). Read without waiting on the worker's loops, so
 * safe and cheap from any thread (a scrape); each value only grows. Immutable.
 *
 * @param limitRejections     P: pulls refused with {@code ERROR} because a {@link SideChannelLimits}
 *                            bound was reached (pending per peer or in total, transfers per peer, sizes)
 * @param errorReplies        P: {@code ERROR} responses sent to D (malformed, rejected or failed pulls)
 * @param malformedMessages   P: side-channel messages with the wrong frame count (dropped)
 * @param repliesDropped      P: replies that could not be written (listener stopped, socket full)
 * @param backlogPauses       P: times the listener stopped reading because its backlog was at its byte budget
 * @param placeholdersExpired P: placeholders of early D pulls dropped after the abort timeout
 * @param staleWaves          P: waves not written because they could not start within the abort timeout
 * @param handshakeRetries    D: pull sockets replaced after a stuck ZMTP handshake
 * @param backgroundErrors    exceptions of background work (loops, transfer pool, pull I/O), each logged
 */
public record WorkerCounters(long limitRejections, long errorReplies, long malformedMessages, long repliesDropped,
        long backlogPauses, long placeholdersExpired, long staleWaves, long handshakeRetries, long backgroundErrors) {
}
