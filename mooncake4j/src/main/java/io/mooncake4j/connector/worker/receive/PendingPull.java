package io.mooncake4j.connector.worker.receive;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

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
    int resends; // times the request went out again on a new connection after one was lost
    private Set<String> heard; // request ids answered (ok or err) so far; made at the first answer
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

    /**
     * {@code r} without the request ids this pull heard already: after a re-send P answers again what
     * the lost connection had answered, and each id must reach the listener once.
     */
    MooncakeXferResponse unseen(MooncakeXferResponse r) {
        List<String> ok = fresh(r.okReqs());
        List<String> err = fresh(r.errReqs());
        if (ok == r.okReqs() && err == r.errReqs()) {
            return r;
        }
        return MooncakeXferResponse.of(r.status(), ok, err, r.errMsg());
    }

    private List<String> fresh(List<String> ids) {
        if (ids == null || ids.isEmpty()) {
            return ids;
        }
        if (heard == null) {
            heard = new HashSet<>();
        }
        boolean repeated = false;
        for (String id : ids) {
            repeated |= heard.contains(id);
        }
        if (!repeated) { // the usual case: nothing to copy
            heard.addAll(ids);
            return ids;
        }
        List<String> out = new ArrayList<>(ids.size());
        for (String id : ids) {
            if (heard.add(id)) {
                out.add(id);
            }
        }
        return out;
    }

    /** {@code tcp://host:port} (or {@code host:port}) as a socket address. */
    static InetSocketAddress socketAddress(String address) {
        int scheme = address.indexOf("://");
        String hp = scheme >= 0 ? address.substring(scheme + 3) : address;
        int colon = hp.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("not a tcp://host:port address: " + address);
        }
        String host = hp.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        return new InetSocketAddress(host, Integer.parseInt(hp.substring(colon + 1)));
    }
}
