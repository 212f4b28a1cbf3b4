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
 * @param selfAimedRefusals   P: pulls (or writes) refused because their destination is P's own engine
 * @param peersDropped        P: side-channel connections the listener closed (protocol violation, limits,
 *                            handshake not done in time, identity in use, connection cap)
 * @param answersDropped      P: final answers ({@code FINISH}/{@code ERROR}) that never reached D, by reason
 * @param bootstrapClosed     P (the worker that launched the bootstrap server): its connections closed by
 *                            its own bounds, by reason; {@link BootstrapClosed#NONE} without a server
 */
public record WorkerCounters(long limitRejections, long errorReplies, long malformedMessages, long repliesDropped,
        long backlogPauses, long placeholdersExpired, long staleWaves, long handshakeRetries, long backgroundErrors,
        long selfAimedRefusals, long peersDropped, AnswersDropped answersDropped, BootstrapClosed bootstrapClosed) {

    /**
     * Final side-channel answers P could not deliver, by reason.
     *
     * @param protocol  the connection was closed by P's listener for breaking the protocol or the limits
     * @param peerGone  the connection was closed by D (or reset) and none has its identity now
     * @param queueFull the connection's out-queue was full (D stopped reading)
     * @param closing   the listener (or its sender loop) was stopping
     */
    public record AnswersDropped(long protocol, long peerGone, long queueFull, long closing) {

        /** None dropped. */
        public static final AnswersDropped NONE = new AnswersDropped(0, 0, 0, 0);

        /** {@return all of them} */
        public long total() {
            return protocol + peerGone + queueFull + closing;
        }
    }

    /**
     * Connections of the bootstrap server closed by its bounds, by reason
     * ({@link io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer}).
     *
     * @param evicted connections closed (with a 503 when still sending) to make room at the connection cap
     * @param refused new connections answered 503 because every open one was processing a request
     * @param expired connections closed at the total request deadline
     */
    public record BootstrapClosed(long evicted, long refused, long expired) {

        /** No server, or none closed. */
        public static final BootstrapClosed NONE = new BootstrapClosed(0, 0, 0);
    }
}
