package io.mooncake4j.engine.handshake;

import java.net.Inet6Address;

/**
 * A segment name split into host and port the way Mooncake's {@code parseHostNameWithPort}
 * ({@code TE/include/common.h}) does: {@code [v6]:port}, a bare IPv6 literal (optionally with
 * {@code %scope}, optionally followed by {@code :port} after the scope), otherwise a split at the
 * last {@code ':'}. A missing or invalid port becomes {@code defaultPort}
 * ({@code MC_HANDSHAKE_PORT}).
 *
 * @param host without brackets
 * @param port the port
 */
public record PeerAddress(String host, int port) {

    /** Splits {@code name}. */
    public static PeerAddress parse(String name, int defaultPort) {
        if (name.startsWith("[")) {
            int close = name.indexOf(']');
            if (close > 0) {
                String h = name.substring(1, close);
                if (isIpv6(h)) {
                    int colon = name.indexOf(':', close);
                    return new PeerAddress(h, colon < 0 ? defaultPort : port(name.substring(colon + 1), defaultPort));
                }
            }
        } else if (isIpv6(name)) {
            return new PeerAddress(name, defaultPort);
        } else {
            int scope = name.indexOf('%');
            if (scope >= 0) {
                int colon = name.indexOf(':', scope);
                if (colon >= 0 && isIpv6(name.substring(0, colon))) {
                    return new PeerAddress(name.substring(0, colon), port(name.substring(colon + 1), defaultPort));
                }
            }
        }
        int colon = name.lastIndexOf(':');
        if (colon < 0) {
            return new PeerAddress(name, defaultPort);
        }
        return new PeerAddress(name.substring(0, colon), port(name.substring(colon + 1), defaultPort));
    }

    /** {@code host:port}, bracketing an IPv6 literal (Mooncake {@code maybeWrapIpV6}). */
    public static String format(String host, int port) {
        return (isIpv6(host) ? "[" + host + "]" : host) + ":" + port;
    }

    /** Whether {@code s} is an IPv6 literal, optionally with a {@code %scope} and no port after it. */
    public static boolean isIpv6(String s) {
        if (s.indexOf(':') < 0) {
            return false;
        }
        int scope = s.indexOf('%');
        String lit = s;
        if (scope >= 0) {
            if (s.indexOf(':', scope) >= 0) {
                return false;
            }
            lit = s.substring(0, scope);
        }
        for (int i = 0; i < lit.length(); i++) {
            char c = lit.charAt(i);
            if (!(c == ':' || c == '.' || Character.digit(c, 16) >= 0)) {
                return false;
            }
        }
        try {
            Inet6Address.ofLiteral(lit);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    private static int port(String s, int def) {
        try {
            int p = Integer.parseInt(s);
            return p >= 0 && p <= 65535 && !s.startsWith("+") ? p : def;
        } catch (NumberFormatException e) {
            return def;
        }
    }
}
