package io.mooncake4j.http;

import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * What one client may make an HTTP front door ({@link HttpFront}) spend: the deadlines a slow client
 * is held to and the share of upload and in-flight slots one client address may take.
 *
 * @param headerTimeout        a request's header block must be complete within this, counted from the
 *                             connection's opening (first request) or from the request's first byte
 *                             (later requests on a kept-alive connection); else the connection is closed
 * @param idleTimeout          a connection with no byte in either direction for this long is closed
 *                             (between requests; a request in flight waiting for the engine is not idle)
 * @param minBodyRate          bytes per second a request body must arrive at, on average, once
 *                             {@code bodyGrace} has passed since it was first read; slower is closed
 * @param bodyGrace            time a body may take before the rate is enforced
 * @param maxHeaderBytes       the largest request line plus header block accepted (431 beyond)
 * @param bodySlots            request bodies read at once (each up to the node's body limit)
 * @param bodySlotsPerClient   of those, how many one client address may hold
 * @param inFlightPerClient    requests in flight one client address may hold; 0 = no share beyond the
 *                             node's own total (a proxy sends everything from one address)
 */
public record HttpLimits(Duration headerTimeout, Duration idleTimeout, long minBodyRate, Duration bodyGrace,
                         int maxHeaderBytes, int bodySlots, int bodySlotsPerClient, int inFlightPerClient) {

    /** Environment variables and the flags that set the same limits ({@code --http-header-timeout} ...). */
    public static final String ENV_HEADER_TIMEOUT = "MOONCAKE4J_HTTP_HEADER_TIMEOUT";
    public static final String ENV_IDLE_TIMEOUT = "MOONCAKE4J_HTTP_IDLE_TIMEOUT";
    public static final String ENV_MIN_BODY_RATE = "MOONCAKE4J_HTTP_MIN_BODY_RATE";
    public static final String ENV_BODY_GRACE = "MOONCAKE4J_HTTP_BODY_GRACE";
    public static final String ENV_MAX_HEADER_BYTES = "MOONCAKE4J_HTTP_MAX_HEADER_BYTES";
    public static final String ENV_BODY_SLOTS = "MOONCAKE4J_HTTP_BODY_SLOTS";
    public static final String ENV_BODY_SLOTS_PER_CLIENT = "MOONCAKE4J_HTTP_BODY_SLOTS_PER_CLIENT";
    public static final String ENV_IN_FLIGHT_PER_CLIENT = "MOONCAKE4J_HTTP_IN_FLIGHT_PER_CLIENT";

    public HttpLimits {
        Objects.requireNonNull(headerTimeout, "headerTimeout");
        Objects.requireNonNull(idleTimeout, "idleTimeout");
        Objects.requireNonNull(bodyGrace, "bodyGrace");
        if (!positive(headerTimeout) || !positive(idleTimeout) || bodyGrace.isNegative()) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "the HTTP header and idle timeouts must "
                    + "be positive and the body grace >= 0, got %s, %s, %s", headerTimeout, idleTimeout, bodyGrace));
        }
        if (minBodyRate < 0) {
            throw new IllegalArgumentException("the minimum body rate must be >= 0 bytes/s, got " + minBodyRate);
        }
        if (maxHeaderBytes < 1024) {
            throw new IllegalArgumentException("the HTTP header limit must be at least 1024 bytes, got " + maxHeaderBytes);
        }
        if (bodySlots < 1 || bodySlotsPerClient < 1 || bodySlotsPerClient > bodySlots) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "body slots must be >= 1 and the share "
                    + "of one client within 1..%d, got %d and %d", bodySlots, bodySlots, bodySlotsPerClient));
        }
        if (inFlightPerClient < 0) {
            throw new IllegalArgumentException("the in-flight share of one client must be >= 0, got " + inFlightPerClient);
        }
    }

    private static boolean positive(Duration d) {
        return !d.isNegative() && !d.isZero();
    }

    /**
     * Headers within 10 s, connections idle at most 30 s, bodies at 1 KiB/s after a 10 s grace,
     * 32 KiB of headers, 64 bodies at once of which 16 from one address, no per-address in-flight share.
     */
    public static HttpLimits defaults() {
        return new HttpLimits(Duration.ofSeconds(10), Duration.ofSeconds(30), 1024, Duration.ofSeconds(10),
                32 << 10, 64, 16, 0);
    }

    /** The limit on requests in flight for one client address, given the node's total. */
    public int inFlightShare(int total) {
        return inFlightPerClient == 0 ? total : Math.min(total, inFlightPerClient);
    }

    public HttpLimits withHeaderTimeout(Duration v) {
        return new HttpLimits(v, idleTimeout, minBodyRate, bodyGrace, maxHeaderBytes, bodySlots, bodySlotsPerClient,
                inFlightPerClient);
    }

    public HttpLimits withIdleTimeout(Duration v) {
        return new HttpLimits(headerTimeout, v, minBodyRate, bodyGrace, maxHeaderBytes, bodySlots, bodySlotsPerClient,
                inFlightPerClient);
    }

    public HttpLimits withMinBodyRate(long v, Duration grace) {
        return new HttpLimits(headerTimeout, idleTimeout, v, grace, maxHeaderBytes, bodySlots, bodySlotsPerClient,
                inFlightPerClient);
    }

    public HttpLimits withMaxHeaderBytes(int v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, v, bodySlots, bodySlotsPerClient,
                inFlightPerClient);
    }

    public HttpLimits withBodySlots(int total, int perClient) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, maxHeaderBytes, total, perClient,
                inFlightPerClient);
    }

    public HttpLimits withInFlightPerClient(int v) {
        return new HttpLimits(headerTimeout, idleTimeout, minBodyRate, bodyGrace, maxHeaderBytes, bodySlots,
                bodySlotsPerClient, v);
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
        return new HttpLimits(header, idle, rate, grace, (int) Math.min(Integer.MAX_VALUE, headerBytes),
                (int) Math.min(Integer.MAX_VALUE, slots), (int) Math.min(Integer.MAX_VALUE, slotsPerClient),
                (int) Math.min(Integer.MAX_VALUE, inFlight));
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
                "  --http-body-grace S           seconds a body may take before the rate applies, default "
                        + d.bodyGrace.toSeconds() + " [" + ENV_BODY_GRACE + "]",
                "  --http-max-header-bytes N     largest request line + headers (431 beyond), default "
                        + d.maxHeaderBytes + " [" + ENV_MAX_HEADER_BYTES + "]",
                "  --http-body-slots N           request bodies read at once, default " + d.bodySlots
                        + " [" + ENV_BODY_SLOTS + "]",
                "  --http-body-slots-per-client N  of those, the most one client address holds, default "
                        + d.bodySlotsPerClient + " [" + ENV_BODY_SLOTS_PER_CLIENT + "]",
                "  --http-in-flight-per-client N   requests in flight one client address may hold (0: no share",
                "                                beyond the total), default " + d.inFlightPerClient + " ["
                        + ENV_IN_FLIGHT_PER_CLIENT + "]");
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
