package io.mooncake4j.connector.worker.send;

/**
 * Sends a reply to the peer of one side-channel message: the listener thread writes
 * {@code [identity, payload]} on the ROUTER socket. Safe to call from any thread. vLLM's send path
 * answers one request with several responses: {@link #sendContinue} for each but the last,
 * {@link #send} for the final answer, which the listener accounts for (sent, or dropped and why).
 */
@FunctionalInterface
public interface ReplySink {

    /**
     * Queues {@code payload}, the message's final answer, for the peer and wakes the listener.
     *
     * @return false when the listener has stopped and the reply was dropped
     */
    boolean send(byte[] payload);

    /**
     * Queues {@code payload}, a reply that more replies to the same message follow; by default as
     * {@link #send} (a sink that does not tell the two apart).
     *
     * @return false when the listener has stopped and the reply was dropped
     */
    default boolean sendContinue(byte[] payload) {
        return send(payload);
    }
}
