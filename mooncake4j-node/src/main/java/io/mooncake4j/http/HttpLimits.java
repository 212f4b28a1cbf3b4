package io.mooncake4j.http;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * What one client may make an HTTP front door ({@link HttpFront}) spend: the deadlines a slow client
 * is held to, the share of upload and in-flight slots one client network may take, and the
 * connections open at once.
 *
 * @param headerTimeout        a request's header block must be complete within this, counted from the
 *                             connection's opening (first request) or from the request's first byte
 *                             (later requests on a kept-alive connection); else the connection is closed
 * @param idleTimeout          a connection with no byte in either direction for this long is closed
 *                             (between requests; a request in flight waiting for the engine is not idle)
 * @param minBodyRate          bytes a request body must deliver per second in every window of
 *                             {@code bodyGrace} once the first {@code bodyGrace} has passed (a recent
 *                             window, not the average since the start: a body that stops after a fast
 *                             start is cut within two windows); slower is closed
 * @param bodyGrace            time a body may take before the rate is enforced, and the rate's window
 * @param bodyDeadlineRate     the overall deadline of a body: {@code bodyGrace} plus its declared length
 *                             at this many bytes per second (a chunked body must average this rate after
 *                             the grace); later is closed; 0 = no overall deadline
 * @param maxHeaderBytes       the largest request line plus header block accepted (431 beyond)
 * @param bodySlots            request bodies read at once (each up to the node's body limit)
 * @param bodySlotsPerClient   of those, how many one client network may hold (see {@code ipv4Prefix})
 * @param inFlightPerClient    requests in flight one client network may hold; 0 = no share beyond the
 *                             node's own total; -1 (the default) = half the node's total, so that one
 *                             network (a router, a proxy) may take much but never all of it
 * @param ipv4Prefix           the shares above are per network, not per address: IPv4 clients in the same
 *                             {@code /ipv4Prefix} (default /24) share one, so that many addresses of one
 *                             network count as one client; 32 = per address
 * @param ipv6Prefix           the same for IPv6 (default /64, what one host usually gets); 128 = per address
 * @param maxConnections       connections open at once; beyond it the node stops accepting until one closes
 */
public record HttpLimits(Duration headerTimeout, Duration idleTimeout, long minBodyRate, Duration bodyGrace,
                         long bodyDeadlineRate, int maxHeaderBytes, int bodySlots, int bodySlotsPerClient,
                         int inFlightPerClient, int ipv4Prefix, int ipv6Prefix, int maxConnections) {

    /** Environment variables and the flags that set the same limits ({@code --http-header-timeout} ...). */
    public static final String ENV_HEADER_TIMEOUT = "MOONCAKE4J_HTTP_HEADER_TIMEOUT";
    public static final String ENV_IDLE_TIMEOUT = "MOONCAKE4J_HTTP_IDLE_TIMEOUT";
    public static final String ENV_MIN_BODY_RATE = "MOONCAKE4J_HTTP_MIN_BODY_RATE";
    public static final String ENV_BODY_GRACE = "MOONCAKE4J_HTTP_BODY_GRACE";
    public static final String ENV_MAX_HEADER_BYTES = "MOONCAKE4J_HTTP_MAX_HEADER_BYTES";
    public static final String ENV_BODY_SLOTS = "MOONCAKE4J_HTTP_BODY_SLOTS";
    public static final String ENV_BODY_SLOTS_PER_CLIENT = "MOONCAKE4J_HTTP_BODY_SLOTS_PER_CLIENT";
    public static final String ENV_IN_FLIGHT_PER_CLIENT = "MOONCAKE4J_HTTP_IN_FLIGHT_PER_CLIENT";
    public static final String ENV_BODY_DEADLINE_RATE = "MOONCAKE4J_HTTP_BODY_DEADLINE_RATE";
    public static final String ENV_IPV4_PREFIX = "MOONCAKE4J_HTTP_IPV4_PREFIX";
    public static final String ENV_IPV6_PREFIX = "MOONCAKE4J_HTTP_IPV6_PREFIX";
    public static final String ENV_MAX_CONNECTIONS = "MOONCAKE4J_HTTP_MAX_CONNECTIONS";

    public HttpLimits {
        Objects.requireNonNull(headerTimeout, "headerTimeout");
        Objects.requireNonNull(idleTimeout, "idleTimeout");
        Objects.requireNonNull(bodyGrace, "bodyGrace");
        if (!positive(headerTimeout) || !positive(idleTimeout) || bodyGrace.isNegative()) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "the HTTP header and idle timeouts must "
                    + "be positive and the body grace >= 0, got %s, %s, %s", headerTimeout, idleTimeout, bodyGrace));
        }
        if (minBodyRate < 0 || bodyDeadlineRate < 0) {
            throw new IllegalArgumentException("the minimum body rate and the body deadline rate must be >= 0 "
                    + "bytes/s, got " + minBodyRate + " and " + bodyDeadlineRate);
        }
        if (ipv4Prefix < 1 || ipv4Prefix > 32 || ipv6Prefix < 1 || ipv6Prefix > 128) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "the client network prefixes must be "
                    + "/1../32 (IPv4) and /1../128 (IPv6), got /%d and /%d", ipv4Prefix, ipv6Prefix));
        }
        if (maxConnections < 1) {
            throw new IllegalArgumentException("the connection cap must be >= 1, got " + maxConnections);
        }
        if (maxHeaderBytes < 1024) {
            throw new IllegalArgumentException("the HTTP header limit must be at least 1024 bytes, got " + maxHeaderBytes);
        }
        if (bodySlots < 1 || bodySlotsPerClient < 1 || bodySlotsPerClient > bodySlots) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "body slots must be >= 1 and the share "
                    + "of one client within 1..%d, got %d and %d", bodySlots, bodySlots, bodySlotsPerClient));
        }
        if (inFlightPerClient < -1) {
            throw new IllegalArgumentException("the in-flight share of one client must be >= 0 (or -1: half the "
                    + "total), got " + inFlightPerClient);
        }
    }

    private static boolean positive(Duration d) {
        return !d.isNegative() && !d.isZero();
    }

    /**
     * Headers within 10 s, connections idle at most 30 s, bodies at 1 KiB/s in every 10 s window after a
     * 10 s grace and complete within 10 s plus their length at 64 KiB/s, 32 KiB of headers, 64 bodies at
     * once of which 16 from one network (/24, /64), half the requests in flight for one network, 4096
     * connections.
     */
    public static HttpLimits defaults() {
        return new HttpLimits(Duration.ofSeconds(10), Duration.ofSeconds(30), 1024, Duration.ofSeconds(10), 64 << 10,
                32 << 10, 64, 16, -1, 24, 64, 4096);
    }

    /**
     * The key of {@code client}'s shares: its network, the address with the bits beyond
     * {@link #ipv4Prefix()} (IPv4, and IPv4-mapped IPv6) or {@link #ipv6Prefix()} cleared.
     */
    public java.net.InetAddress network(java.net.InetAddress client) {
        return prefixOf(client, ipv4Prefix, ipv6Prefix);
    }

    /** {@code a} with the bits beyond the prefix of its family cleared. */
    public static java.net.InetAddress prefixOf(java.net.InetAddress a, int v4Bits, int v6Bits) {
        byte[] b = a.getAddress();
        int bits = b.length == 4 ? v4Bits : v6Bits;
        if (bits >= b.length * 8) {
            return a;
        }
        for (int i = 0; i < b.length; i++) {
            int keep = Math.clamp(bits - i * 8L, 0, 8);
            b[i] &= (byte) (0xff << (8 - keep));
        }
        try {
            return java.net.InetAddress.getByAddress(b);
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException(e); // 4 or 16 bytes: cannot happen
        }
    }

    /** The limit on requests in flight for one client address, given the node's total. */
    public int inFlightShare(int total) {
        return inFlightPerClient == 0 ? total
                : inFlightPerClient < 0 ? Math.max(1, total / 2) : Math.min(total, inFlightPerClient);
    }

    public HttpLimits withHeaderTimeout(Duration v) {
        return new HttpLimits(v, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes, bodySlots,
                bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withIdleTimeout(Duration v) {
        return new HttpLimits(headerTimeout, v, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes, bodySlots,
                bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withMinBodyRate(long v, Duration grace) {
        return new HttpLimits(headerTimeout, idleTimeout, v, grace, bodyDeadlineRate, maxHeaderBytes, bodySlots,
                bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withBodyDeadlineRate(long v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, v, maxHeaderBytes, bodySlots,
                bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withMaxHeaderBytes(int v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, v, bodySlots,
                bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withBodySlots(int total, int perClient) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes,
                total, perClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withInFlightPerClient(int v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes,
                bodySlots, bodySlotsPerClient, v, ipv4Prefix, ipv6Prefix, maxConnections);
    }

    public HttpLimits withPrefixes(int v4, int v6) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes,
                bodySlots, bodySlotsPerClient, inFlightPerClient, v4, v6, maxConnections);
    }

    public HttpLimits withMaxConnections(int v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, bodyDeadlineRate, maxHeaderBytes,
                bodySlots, bodySlotsPerClient, inFlightPerClient, ipv4Prefix, ipv6Prefix, v);
    }

    /**
     * The limits named by flags (without the leading {@code --}, e.g. {@code http-header-timeout}) or, when a
     * flag is absent, by the environment ({@link #ENV_HEADER_TIMEOUT} ...), over {@link #defaults()}.
     *
     * @param flag the value of a flag, or null when it was not given
     * @param env  the environment
     * @throws IllegalArgumentException a value is not a number or out of range (the message names it)
     */
    public static HttpLimits from(Function<String, String> flag, Map<String, String> env) {
        HttpLimits d = defaults();
        Duration header = seconds(value(flag, env, "http-header-timeout", ENV_HEADER_TIMEOUT), d.headerTimeout);
        Duration idle = seconds(value(flag, env, "http-idle-timeout", ENV_IDLE_TIMEOUT), d.idleTimeout);
        long rate = number(value(flag, env, "http-min-body-rate", ENV_MIN_BODY_RATE), d.minBodyRate);
        Duration grace = seconds(value(flag, env, "http-body-grace", ENV_BODY_GRACE), d.bodyGrace);
        long headerBytes = number(value(flag, env, "http-max-header-bytes", ENV_MAX_HEADER_BYTES), d.maxHeaderBytes);
        long slots = number(value(flag, env, "http-body-slots", ENV_BODY_SLOTS), d.bodySlots);
        Named perClient = value(flag, env, "http-body-slots-per-client", ENV_BODY_SLOTS_PER_CLIENT);
        // a smaller total without a share of its own keeps the default's quarter per client
        long slotsPerClient = number(perClient, Math.max(1, Math.min(slots, d.bodySlotsPerClient * slots / d.bodySlots)));
        long inFlight = number(value(flag, env, "http-in-flight-per-client", ENV_IN_FLIGHT_PER_CLIENT),
                d.inFlightPerClient);
        long deadlineRate = number(value(flag, env, "http-body-deadline-rate", ENV_BODY_DEADLINE_RATE),
                d.bodyDeadlineRate);
        long v4 = number(value(flag, env, "http-ipv4-prefix", ENV_IPV4_PREFIX), d.ipv4Prefix);
        long v6 = number(value(flag, env, "http-ipv6-prefix", ENV_IPV6_PREFIX), d.ipv6Prefix);
        long conns = number(value(flag, env, "http-max-connections", ENV_MAX_CONNECTIONS), d.maxConnections);
        return new HttpLimits(header, idle, rate, grace, deadlineRate, (int) Math.min(Integer.MAX_VALUE, headerBytes),
                (int) Math.min(Integer.MAX_VALUE, slots), (int) Math.min(Integer.MAX_VALUE, slotsPerClient),
                (int) Math.min(Integer.MAX_VALUE, inFlight), (int) Math.min(Integer.MAX_VALUE, v4),
                (int) Math.min(Integer.MAX_VALUE, v6), (int) Math.min(Integer.MAX_VALUE, conns));
    }

    /** The flags' lines of a command's usage text (the environment variable of each in brackets). */
    public static java.util.List<String> usage() {
        HttpLimits d = defaults();
        return java.util.List.of(
                "  --http-header-timeout S       a request's headers must be complete within S seconds, default "
                        + d.headerTimeout.toSeconds() + " [" + ENV_HEADER_TIMEOUT + "]",
                "  --http-idle-timeout S         close a connection idle for S seconds, default "
                        + d.idleTimeout.toSeconds() + " [" + ENV_IDLE_TIMEOUT + "]",
                "  --http-min-body-rate B        bytes/s a request body must arrive at (0: off), default "
                        + d.minBodyRate + " [" + ENV_MIN_BODY_RATE + "]",
                "  --http-body-grace S           seconds a body may take before the rate applies, and the",
                "                                rate's window, default " + d.bodyGrace.toSeconds() + " ["
                        + ENV_BODY_GRACE + "]",
                "  --http-body-deadline-rate B   a body must be complete within the grace plus its length at B",
                "                                bytes/s (0: off), default " + d.bodyDeadlineRate + " ["
                        + ENV_BODY_DEADLINE_RATE + "]",
                "  --http-max-header-bytes N     largest request line + headers (431 beyond), default "
                        + d.maxHeaderBytes + " [" + ENV_MAX_HEADER_BYTES + "]",
                "  --http-body-slots N           request bodies read at once, default " + d.bodySlots
                        + " [" + ENV_BODY_SLOTS + "]",
                "  --http-body-slots-per-client N  of those, the most one client address holds, default "
                        + d.bodySlotsPerClient + " [" + ENV_BODY_SLOTS_PER_CLIENT + "]",
                "  --http-in-flight-per-client N   requests in flight one client network may hold (0: no share",
                "                                beyond the total), default half the total ["
                        + ENV_IN_FLIGHT_PER_CLIENT + "]",
                "  --http-ipv4-prefix N          IPv4 clients in one /N share the shares above, default "
                        + d.ipv4Prefix + " [" + ENV_IPV4_PREFIX + "]",
                "  --http-ipv6-prefix N          IPv6 clients in one /N share them, default " + d.ipv6Prefix
                        + " [" + ENV_IPV6_PREFIX + "]",
                "  --http-max-connections N      connections open at once (then accepting pauses), default "
                        + d.maxConnections + " [" + ENV_MAX_CONNECTIONS + "]");
    }

    private record Named(String name, String value) {}

    private static Named value(Function<String, String> flag, Map<String, String> env, String flagName, String envName) {
        String f = flag.apply(flagName);
        if (f != null) {
            return new Named("--" + flagName, f);
        }
        String e = env.get(envName);
        return e == null || e.isBlank() ? null : new Named(envName, e);
    }

    private static Duration seconds(Named v, Duration dflt) {
        if (v == null) {
            return dflt;
        }
        try {
            double s = Double.parseDouble(v.value.trim());
            if (!(s >= 0) || s > 1e9) {
                throw new NumberFormatException();
            }
            return Duration.ofNanos((long) (s * 1e9));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "%s must be a number of seconds, got '%s'",
                    v.name, v.value), e);
        }
    }

    private static long number(Named v, long dflt) {
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v.value.trim());
            if (n < 0) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "%s must be a whole number >= 0, got '%s'",
                    v.name, v.value), e);
        }
    }
}
