package io.mooncake4j.connector.worker.send;

/**
 * Counters of the producer's side-channel listener, a snapshot.
 *
 * @param messagesReceived  messages read from the ROUTER socket
 * @param malformedMessages messages whose frame count was not identity + 1 payload
 * @param handlerErrors     exceptions thrown by the {@link SideChannelHandler}
 * @param repliesSent       replies written to the socket
 * @param repliesDropped    replies that could not be written (listener stopped, socket full)
 * @param listenerErrors    unexpected errors inside the listener loop (it keeps running)
 * @param backlogPauses     times the listener stopped reading because the messages handed to the sender loop
 *                          and not yet handled exceeded their byte budget (4 × the maximum message size)
 * @param peersDropped      connections the listener closed itself: a ZMTP violation, a frame or message above the
 *                          limits, a handshake not done in time, an identity in use, the connection cap
 * @param answers           what became of the final answers of the messages received
 */
public record ListenerStats(long messagesReceived, long malformedMessages, long handlerErrors, long repliesSent,
                            long repliesDropped, long listenerErrors, long backlogPauses, long peersDropped,
                            Answers answers) {

    /** All zero: no listener. */
    public static final ListenerStats NONE = new ListenerStats(0, 0, 0, 0, 0, 0, 0, 0, new Answers(0, 0, 0, 0, 0));

    /**
     * The final answers ({@code FINISH} or {@code ERROR}: one per message) of the messages received, by what
     * became of them. Once every handler has answered, {@code messagesReceived - sent} equals
     * {@link #dropped()} plus the handler errors (a handler that threw answered nothing).
     *
     * @param sent             written to the message's connection, or to the connection that took its identity over
     *                         (a peer that reconnected with the same identity)
     * @param droppedProtocol  its connection was closed by the listener for breaking the protocol or the limits
     * @param droppedPeerGone  its connection was closed by the peer (or reset, or gave its slot up) and no
     *                         connection has its identity now
     * @param droppedQueueFull its connection's out-queue was full (the peer stopped reading)
     * @param droppedClosing   the listener was stopping (or its sender loop was, and the message was not handled)
     */
    public record Answers(long sent, long droppedProtocol, long droppedPeerGone, long droppedQueueFull,
                          long droppedClosing) {

        /** {@return the final answers dropped, for any reason} */
        public long dropped() {
            return droppedProtocol + droppedPeerGone + droppedQueueFull + droppedClosing;
        }
    }
}
