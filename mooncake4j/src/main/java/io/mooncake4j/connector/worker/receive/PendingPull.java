package io.mooncake4j.connector.worker.receive;

/**
 * One pull request to one P worker, as {@link PullChannels} serves it: its connection (and probe), where
 * it stands in the handshake, the request and the answer, and its deadlines. I/O thread only.
 */
final class PendingPull {

    final String address;
    final byte[] payload;
    final PullChannels.Listener listener;
    PullChannels.Conn conn;
    PullChannels.Conn probe;
    boolean sent; // the request frame was queued on a connection whose peer READY was validated
    boolean lost; // its connection was lost after the request went out
    boolean aliveLogged;
    String lostReason;
    int attempts;
    long receiveDeadline;
    long handshakeDeadline;
    long reconnectAt; // 0: not waiting to reconnect
    long nextProbeAt;
    boolean done;

    PendingPull(String address, byte[] payload, PullChannels.Listener listener) {
        this.address = address;
        this.payload = payload;
        this.listener = listener;
    }
}
