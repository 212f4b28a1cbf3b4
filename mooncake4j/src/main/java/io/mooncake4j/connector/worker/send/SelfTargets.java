package io.mooncake4j.connector.worker.send;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Whether a pull's destination ({@code remote_hostname:remote_port}) is P's own engine: a D must never
 * make P write a request's blocks into P's own memory, where they overwrite other requests' cache (the
 * writes stay inside registered memory, so nothing else stops them). vLLM trusts D's destination.
 *
 * <p>A destination is P's own when it is P's segment name, or when its port is P's RPC port and its host
 * is P's hostname, {@code localhost}, or resolves to a loopback, wildcard or local interface address.
 * {@link #refusal} needs no name service (the sender loop must not block): names and address literals
 * only. {@link #resolvesToSelf} resolves the other names, on a transfer-pool thread before the write;
 * its answers are kept (a bounded number of names) so that a name costs one lookup.
 *
 * <p>Thread-safe.
 */
final class SelfTargets {

    /** The text of the ERROR answer (and of a refused write's error). */
    static final String MESSAGE = "the pull's destination %s is this P worker's own engine: P does not write "
            + "into its own memory";

    private static final int MAX_RESOLVED = 1024;

    private final String segmentName;
    private final int rpcPort;
    private final String hostname;
    private final Map<String, Boolean> resolved = new ConcurrentHashMap<>();

    /**
     * @param segmentName P's engine's segment name ({@code host:rpcPort})
     * @param rpcPort     P's engine's RPC port
     * @param hostname    the hostname P's worker announces
     */
    SelfTargets(String segmentName, int rpcPort, String hostname) {
        this.segmentName = Objects.requireNonNull(segmentName, "segmentName");
        this.rpcPort = rpcPort;
        this.hostname = Objects.requireNonNull(hostname, "hostname");
    }

    /** The ERROR text when {@code host:port} is P's own engine by name or address literal, else null (no lookup). */
    String refusal(String host, int port) {
        String dest = host + ":" + port;
        if (dest.equals(segmentName)) {
            return String.format(Locale.ROOT, MESSAGE, dest);
        }
        if (port != rpcPort) {
            return null;
        }
        String h = strip(host);
        if (h.equalsIgnoreCase(hostname) || h.equalsIgnoreCase("localhost") || h.equalsIgnoreCase(hostOf(segmentName))) {
            return String.format(Locale.ROOT, MESSAGE, dest);
        }
        InetAddress literal = literal(h);
        return literal != null && isLocal(literal) ? String.format(Locale.ROOT, MESSAGE, dest) : null;
    }

    /**
     * Whether {@code host:port} reaches P's own engine once {@code host} is resolved (may block on the
     * name service: not on the sender loop). A name that does not resolve is not P (the write fails anyway).
     */
    boolean resolvesToSelf(String host, int port) {
        if (refusal(host, port) != null) {
            return true;
        }
        if (port != rpcPort) {
            return false;
        }
        String h = strip(host);
        Boolean known = resolved.get(h);
        if (known != null) {
            return known;
        }
        boolean self = false;
        try {
            for (InetAddress a : InetAddress.getAllByName(h)) {
                self |= isLocal(a);
            }
        } catch (UnknownHostException | SecurityException e) {
            self = false;
        }
        if (resolved.size() < MAX_RESOLVED) {
            resolved.put(h, self);
        }
        return self;
    }

    private static String strip(String host) {
        return host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    }

    private static String hostOf(String segment) {
        int colon = segment.lastIndexOf(':');
        return strip(colon < 0 ? segment : segment.substring(0, colon));
    }

    /** {@code host} as an address when it is an IP literal, else null; never a lookup. */
    private static InetAddress literal(String host) {
        try {
            return InetAddress.ofLiteral(host);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    private static boolean isLocal(InetAddress a) {
        if (a.isLoopbackAddress() || a.isAnyLocalAddress()) {
            return true;
        }
        try {
            return NetworkInterface.getByInetAddress(a) != null;
        } catch (SocketException | RuntimeException e) {
            return false; // unknown: the engine's own checks decide
        }
    }
}
