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
 */
public record ListenerStats(long messagesReceived, long malformedMessages, long handlerErrors, long repliesSent,
                            long repliesDropped, long listenerErrors, long backlogPauses, long peersDropped) {
}
