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
 * @param maxConcurrentConnections handshake connections served at once; more wait in the backlog
 */
public record HandshakeConfig(int minPort, int maxPort, InetAddress bindAddress, int maxFrameLength,
        int connectTimeoutMs, int clientReadTimeoutMs, int serverReadTimeoutMs, int backlog,
        int defaultPort, int maxConcurrentConnections) {

    private static final Logger LOG = LoggerFactory.getLogger(HandshakeConfig.class);

    public static final int DEFAULT_MIN_PORT = 15000;
    public static final int DEFAULT_MAX_PORT = 17000;
    public static final int DEFAULT_MAX_FRAME_LENGTH = 1 << 20;
    public static final int MAX_MAX_FRAME_LENGTH = 128 << 20;

    public HandshakeConfig {
        if (maxPort != 0 && (minPort < 1 || minPort > maxPort || maxPort > 65535)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "bad port range [%d, %d]", minPort, maxPort));
        }
        if (maxFrameLength < 1 || connectTimeoutMs < 1 || clientReadTimeoutMs < 1 || serverReadTimeoutMs < 1
                || backlog < 1 || maxConcurrentConnections < 1) {
            throw new IllegalArgumentException("handshake limits must be positive");
        }
    }

    /** Mooncake's defaults with the environment applied. */
    public static HandshakeConfig fromEnvironment() {
        return fromEnvironment(System.getenv());
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
        return new HandshakeConfig(min, max, bind, frame, connect * 1000, 60_000, 5_000, backlog, defPort, 64);
    }

    /** A config for tests: OS-assigned ports on {@code bind}, other values from Mooncake's defaults. */
    public static HandshakeConfig ephemeral(InetAddress bind) {
        return new HandshakeConfig(0, 0, bind, DEFAULT_MAX_FRAME_LENGTH, 5_000, 60_000, 5_000, 128, 12001, 64);
    }

    /** A copy with other server/client read timeouts (tests). */
    public HandshakeConfig withTimeouts(int serverReadMs, int clientReadMs) {
        return new HandshakeConfig(minPort, maxPort, bindAddress, maxFrameLength, connectTimeoutMs, clientReadMs,
                serverReadMs, backlog, defaultPort, maxConcurrentConnections);
    }

    /** A copy with another frame limit (tests). */
    public HandshakeConfig withMaxFrameLength(int length) {
        return new HandshakeConfig(minPort, maxPort, bindAddress, length, connectTimeoutMs, clientReadTimeoutMs,
                serverReadTimeoutMs, backlog, defaultPort, maxConcurrentConnections);
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
