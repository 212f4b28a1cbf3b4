package io.mooncake4j.engine.handshake;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.UnknownHostException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The handshake client (Mooncake {@code SocketHandShakePlugin::doSend*}): every request opens a
 * fresh connection, writes one frame, reads exactly one reply frame of the same type and closes
 * (no half-close). Connect is bounded by {@code MC_HANDSHAKE_CONNECT_TIMEOUT}, each read by 60 s,
 * and the whole request (all addresses of the host together) by
 * {@link HandshakeConfig#clientRequestTimeoutMs()}: at that deadline the socket is closed and the
 * request fails, however the peer trickles its reply. Stateless and thread-safe.
 */
public final class HandshakeClient {

    private final HandshakeConfig config;

    public HandshakeClient(HandshakeConfig config) {
        this.config = config;
    }

    /** Sends {@code request} to {@code peer} and returns the reply frame. */
    public HandshakeFrame send(PeerAddress peer, HandshakeFrame request) {
        InetAddress[] addrs;
        try {
            addrs = InetAddress.getAllByName(peer.host());
        } catch (UnknownHostException e) {
            throw new HandshakeException(ErrorCodes.DNS, String.format(Locale.ROOT,
                    "cannot resolve handshake peer host '%s'", peer.host()), e);
        }
        IOException last = null;
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(
                config.clientRequestTimeoutMs());
        for (InetAddress a : addrs) {
            long leftMs = java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (leftMs <= 0) {
                last = new java.net.SocketTimeoutException(String.format(Locale.ROOT,
                        "no reply within the %d ms request deadline (MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS)",
                        config.clientRequestTimeoutMs()));
                break;
            }
            Socket s = new Socket();
            SocketDeadlines.Deadline d = SocketDeadlines.arm(s, leftMs);
            try (s; d) {
                s.setReuseAddress(true);
                s.setTcpNoDelay(true);
                s.connect(new InetSocketAddress(a, peer.port()), (int) Math.min(config.connectTimeoutMs(), leftMs));
                s.setSoTimeout(config.clientReadTimeoutMs());
                OutputStream out = s.getOutputStream();
                out.write(request.encode());
                out.flush();
                InputStream in = s.getInputStream();
                HandshakeFrame reply;
                try {
                    reply = HandshakeFrame.read(in, config.maxFrameLength());
                } catch (HandshakeFrame.FrameException e) {
                    throw new HandshakeException(ErrorCodes.SOCKET, String.format(Locale.ROOT,
                            "bad %s reply from %s:%d: %s", HandshakeFrame.typeName(request.type()), peer.host(),
                            peer.port(), e.getMessage()), e);
                }
                if (reply.type() != request.type()) {
                    throw new HandshakeException(ErrorCodes.SOCKET, String.format(Locale.ROOT,
                            "%s request to %s:%d answered with %s", HandshakeFrame.typeName(request.type()),
                            peer.host(), peer.port(), HandshakeFrame.typeName(reply.type())));
                }
                return reply;
            } catch (IOException e) {
                last = d.fired() || System.nanoTime() - deadline >= 0
                        ? new java.net.SocketTimeoutException(String.format(Locale.ROOT,
                                "no reply within the %d ms request deadline (MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS): %s",
                                config.clientRequestTimeoutMs(), e))
                        : e;
            }
        }
        throw new HandshakeException(ErrorCodes.SOCKET, String.format(Locale.ROOT,
                "%s request to %s:%d failed: %s; is the peer engine running and is its RPC port reachable?",
                HandshakeFrame.typeName(request.type()), peer.host(), peer.port(),
                last == null ? "no address" : last.toString()), last);
    }

    /**
     * Fetches a peer's segment descriptor (Metadata, type 1). {@code ownDescriptorJson} is sent as
     * the body (C++ ignores it; {@code "{}\n"} is fine).
     */
    public SegmentDescriptor fetchDescriptor(PeerAddress peer, String ownDescriptorJson) {
        HandshakeFrame reply = send(peer, new HandshakeFrame(HandshakeFrame.METADATA, ownDescriptorJson));
        try {
            return SegmentDescriptor.parse(reply.json());
        } catch (SegmentDescriptor.InvalidDescriptorException e) {
            int code = reply.json().isBlank() ? ErrorCodes.MALFORMED_JSON : ErrorCodes.METADATA;
            throw new HandshakeException(code, String.format(Locale.ROOT,
                    "segment descriptor from %s:%d rejected: %s", peer.host(), peer.port(), e.getMessage()), e);
        }
    }

    /** Probe (type 3): {@code {}} → {@code {"status":"success"}}. */
    public void probe(PeerAddress peer) {
        HandshakeFrame reply = send(peer, new HandshakeFrame(HandshakeFrame.PROBE, "{}\n"));
        try {
            Json.parse(reply.json());
        } catch (JsonException e) {
            throw new HandshakeException(ErrorCodes.MALFORMED_JSON, "bad Probe reply from " + peer, e);
        }
    }

    /** Notify (type 2); succeeds when the reply's {@code notify_msg} is non-empty. */
    public void notify(PeerAddress peer, String name, String message) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", name);
        m.put("notify_msg", message);
        HandshakeFrame reply = send(peer, new HandshakeFrame(HandshakeFrame.NOTIFY, Json.write(m, true) + "\n"));
        Object r;
        try {
            r = Json.parse(reply.json());
        } catch (JsonException e) {
            throw new HandshakeException(ErrorCodes.MALFORMED_JSON, "bad Notify reply from " + peer, e);
        }
        if (!(r instanceof Map<?, ?> rm) || !(rm.get("notify_msg") instanceof String s) || s.isEmpty()) {
            throw new HandshakeException(ErrorCodes.SOCKET, "Notify to " + peer + " not acknowledged: " + r);
        }
    }
}
