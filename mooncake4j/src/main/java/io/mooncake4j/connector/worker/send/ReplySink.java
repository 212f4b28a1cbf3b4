package io.mooncake4j.connector.worker.send;

/**
 * Sends a reply to the peer of one side-channel message: the listener thread writes
 * {@code [identity, payload]} on the ROUTER socket. Safe to call from any thread and any number
 * of times (vLLM's send path answers one request with several responses).
 */
@FunctionalInterface
public interface ReplySink {

    /**
     * Queues {@code payload} for the peer and wakes the listener.
     *
     * @return false when the listener has stopped and the reply was dropped
     */
    boolean send(byte[] payload);
}
