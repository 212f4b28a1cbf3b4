package io.mooncake4j.engine.handshake;

import java.net.InetAddress;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Control-plane settings, read once from Mooncake's environment variables
 * ({@code TE/src/config.cpp}, {@code TE/include/common.h}). Values outside Mooncake's accepted
 * ranges fall back to Mooncake's defaults with one WARN.
 *
 * <table>
 *   <caption>Variables honoured</caption>
 *   <tr><th>Variable</th><th>Default</th><th>Effect</th></tr>
 *   <tr><td>{@code MC_MIN_RPC_PORT}/{@code MC_MAX_RPC_PORT} (aliases {@code MC_MIN_PRC_PORT}/{@code MC_MAX_PRC_PORT})</td>
 *       <td>15000/17000</td><td>random range for the RPC and TCP data ports</td></tr>
 *   <tr><td>{@code MC_HANDSHAKE_MAX_LENGTH}</td><td>1 MiB</td><td>largest frame, 1 B–128 MiB</td></tr>
 *   <tr><td>{@code MC_HANDSHAKE_CONNECT_TIMEOUT}</td><td>5 s</td><td>client connect timeout, 1–3599</td></tr>
 *   <tr><td>{@code MC_HANDSHAKE_LISTEN_BACKLOG}</td><td>128</td><td>listen backlog</td></tr>
 *   <tr><td>{@code MC_HANDSHAKE_PORT}</td><td>12001</td><td>port assumed for a name without one</td></tr>
 *   <tr><td>{@code MC_USE_IPV6}</td><td>off</td><td>bind the wildcard IPv6 address</td></tr>
 *   <tr><td>{@code MOONCAKE4J_HANDSHAKE_REQUEST_TIMEOUT_MS}</td><td>10000</td><td>server: total time per
 *       connection (read the request, answer, wait for the client's close); then it is closed</td></tr>
 *   <tr><td>{@code MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS}</td><td>30000</td><td>client: total time per
 *       request (connect, write, read the reply), e.g. a descriptor fetch in {@code openSegment}</td></tr>
 *   <tr><td>{@code MOONCAKE4J_HANDSHAKE_MAX_CONNECTIONS}</td><td>256</td><td>server: connections open at
 *       once; one more closes the oldest</td></tr>
 * </table>
 *
 * @param minPort           lowest port tried; with {@code maxPort == 0} the OS assigns the port
 * @param maxPort           highest port tried, or 0 for an OS-assigned port (tests)
 * @param bindAddress       address the listeners bind ({@code null} = wildcard, as Mooncake)
 * @param maxFrameLength    {@code MC_HANDSHAKE_MAX_LENGTH}
 * @param connectTimeoutMs  {@code MC_HANDSHAKE_CONNECT_TIMEOUT} in ms
 * @param clientReadTimeoutMs the client's read timeout (Mooncake: {@code SO_RCVTIMEO} 60 s)
 * @param serverReadTimeoutMs the server's per-connection read timeout (Mooncake: 5 s)
 * @param backlog           {@code MC_HANDSHAKE_LISTEN_BACKLOG}
 * @param defaultPort       {@code MC_HANDSHAKE_PORT}
 * @param maxConcurrentConnections handshake connections open at once; a new one beyond it closes the oldest
 * @param serverRequestTimeoutMs total deadline of one server connection, from accept to close
 * @param clientRequestTimeoutMs total deadline of one client request, from connect to the reply
 */
public record HandshakeConfig(int minPort, int maxPort, InetAddress bindAddress, int maxFrameLength,
        int connectTimeoutMs, int clientReadTimeoutMs, int serverReadTimeoutMs, int backlog,
        int defaultPort, int maxConcurrentConnections, int serverRequestTimeoutMs, int clientRequestTimeoutMs) {

    private static final Logger LOG = LoggerFactory.getLogger(HandshakeConfig.class);

    public static final int DEFAULT_MIN_PORT = 15000;
    public static final int DEFAULT_MAX_PORT = 17000;
    public static final int DEFAULT_MAX_FRAME_LENGTH = 1 << 20;
    public static final int MAX_MAX_FRAME_LENGTH = 128 << 20;
    public static final int DEFAULT_MAX_CONNECTIONS = 256;
    public static final int DEFAULT_SERVER_REQUEST_TIMEOUT_MS = 10_000;
    public static final int DEFAULT_CLIENT_REQUEST_TIMEOUT_MS = 30_000;

    public HandshakeConfig {
        if (maxPort != 0 && (minPort < 1 || minPort > maxPort || maxPort > 65535)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "bad port range [%d, %d]", minPort, maxPort));
        }
        if (maxFrameLength < 1 || connectTimeoutMs < 1 || clientReadTimeoutMs < 1 || serverReadTimeoutMs < 1
                || backlog < 1 || maxConcurrentConnections < 1 || serverRequestTimeoutMs < 1
                || clientRequestTimeoutMs < 1) {
            throw new IllegalArgumentException("handshake limits must be positive");
        }
    }

    /** The settings without total deadlines given: {@link #DEFAULT_SERVER_REQUEST_TIMEOUT_MS}, {@link #DEFAULT_CLIENT_REQUEST_TIMEOUT_MS}. */
    public HandshakeConfig(int minPort, int maxPort, InetAddress bindAddress, int maxFrameLength,
            int connectTimeoutMs, int clientReadTimeoutMs, int serverReadTimeoutMs, int backlog,
            int defaultPort, int maxConcurrentConnections) {
        this(minPort, maxPort, bindAddress, maxFrameLength, connectTimeoutMs, clientReadTimeoutMs, serverReadTimeoutMs,
                backlog, defaultPort, maxConcurrentConnections, DEFAULT_SERVER_REQUEST_TIMEOUT_MS,
                DEFAULT_CLIENT_REQUEST_TIMEOUT_MS);
    }

    /** Mooncake's defaults with {@code env} applied (testable). */
    public static HandshakeConfig fromEnvironment(Map<String, String> env) {
        int min = intVar(env, "MC_MIN_RPC_PORT", "MC_MIN_PRC_PORT", DEFAULT_MIN_PORT);
        int max = intVar(env, "MC_MAX_RPC_PORT", "MC_MAX_PRC_PORT", DEFAULT_MAX_PORT);
        if (!validPort(min) || !validPort(max) || min > max) {
            LOG.warn("ignoring MC_MIN_RPC_PORT/MC_MAX_RPC_PORT = {}/{}: ports must be 1024-65535, outside "
                    + "32768-60999, min <= max; using {}-{}", min, max, DEFAULT_MIN_PORT, DEFAULT_MAX_PORT);
            min = DEFAULT_MIN_PORT;
            max = DEFAULT_MAX_PORT;
        }
        int frame = intVar(env, "MC_HANDSHAKE_MAX_LENGTH", null, DEFAULT_MAX_FRAME_LENGTH);
        if (frame < 1 || frame > MAX_MAX_FRAME_LENGTH) {
            LOG.warn("ignoring MC_HANDSHAKE_MAX_LENGTH={}: must be 1-{}", frame, MAX_MAX_FRAME_LENGTH);
            frame = DEFAULT_MAX_FRAME_LENGTH;
        }
        int connect = intVar(env, "MC_HANDSHAKE_CONNECT_TIMEOUT", null, 5);
        if (connect < 1 || connect > 3599) {
            LOG.warn("ignoring MC_HANDSHAKE_CONNECT_TIMEOUT={}: must be 1-3599 s", connect);
            connect = 5;
        }
        int backlog = intVar(env, "MC_HANDSHAKE_LISTEN_BACKLOG", null, 128);
        if (backlog < 1) {
            backlog = 128;
        }
        int defPort = intVar(env, "MC_HANDSHAKE_PORT", null, 12001);
        if (defPort < 1 || defPort > 65535) {
            defPort = 12001;
        }
        InetAddress bind = null;
        if (flag(env.get("MC_USE_IPV6"))) {
            try {
                bind = InetAddress.getByName("::");
            } catch (java.net.UnknownHostException e) {
                throw new IllegalStateException("cannot resolve ::", e);
            }
        }
        int maxConn = positive(env, "MOONCAKE4J_HANDSHAKE_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS);
        int serverTotal = positive(env, "MOONCAKE4J_HANDSHAKE_REQUEST_TIMEOUT_MS", DEFAULT_SERVER_REQUEST_TIMEOUT_MS);
        int clientTotal = positive(env, "MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS", DEFAULT_CLIENT_REQUEST_TIMEOUT_MS);
        return new HandshakeConfig(min, max, bind, frame, connect * 1000, 60_000, 5_000, backlog, defPort, maxConn,
                serverTotal, clientTotal);
    }

    private static int positive(Map<String, String> env, String name, int def) {
        int v = intVar(env, name, null, def);
        if (v < 1) {
            LOG.warn("ignoring {}={}: must be positive; using {}", name, v, def);
            return def;
        }
        return v;
    }

    /** A config for tests: OS-assigned ports on {@code bind}, other values from Mooncake's defaults. */
    public static HandshakeConfig ephemeral(InetAddress bind) {
        return new HandshakeConfig(0, 0, bind, DEFAULT_MAX_FRAME_LENGTH, 5_000, 60_000, 5_000, 128, 12001,
                DEFAULT_MAX_CONNECTIONS);
    }

    /** A copy with other total deadlines and connection cap (tests). */
    public HandshakeConfig withRequestLimits(int serverRequestMs, int clientRequestMs, int maxConnections) {
        return new HandshakeConfig(minPort, maxPort, bindAddress, maxFrameLength, connectTimeoutMs, clientReadTimeoutMs,
                serverReadTimeoutMs, backlog, defaultPort, maxConnections, serverRequestMs, clientRequestMs);
    }

    /** A copy with other server/client read timeouts (tests). */
    public HandshakeConfig withTimeouts(int serverReadMs, int clientReadMs) {
        return new HandshakeConfig(minPort, maxPort, bindAddress, maxFrameLength, connectTimeoutMs, clientReadMs,
                serverReadMs, backlog, defaultPort, maxConcurrentConnections, serverRequestTimeoutMs,
                clientRequestTimeoutMs);
    }

    /** A copy with another frame limit (tests). */
    public HandshakeConfig withMaxFrameLength(int length) {
        return new HandshakeConfig(minPort, maxPort, bindAddress, length, connectTimeoutMs, clientReadTimeoutMs,
                serverReadTimeoutMs, backlog, defaultPort, maxConcurrentConnections, serverRequestTimeoutMs,
                clientRequestTimeoutMs);
    }

    private static boolean validPort(int p) {
        return p >= 1024 && p <= 65535 && (p < 32768 || p > 60999);
    }

    static boolean flag(String v) {
        if (v == null) {
            return false;
        }
        String s = v.trim().toLowerCase(Locale.ROOT);
        return !(s.isEmpty() || s.equals("0") || s.equals("false") || s.equals("no") || s.equals("off"));
    }

    static int intVar(Map<String, String> env, String name, String alias, int def) {
        String v = env.get(name);
        if (v == null && alias != null) {
            v = env.get(alias);
        }
        if (v == null || v.isBlank()) {
            return def;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            LOG.warn("ignoring {}='{}': not an integer", name, v);
            return def;
        }
    }
}
