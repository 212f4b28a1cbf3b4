package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.spi.EngineSettings;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Settings of the TCP transport, parsed once from the engine's environment snapshot
 * ({@link #fromSettings}; {@link EngineSettings#processEnvironment()} is the one read of the process's
 * variables) from Mooncake's variables and mooncake4j's own. Out-of-range values fall back to the
 * default with one WARN.
 *
 * <table>
 *   <caption>Variables honoured</caption>
 *   <tr><th>Variable</th><th>Default</th><th>Effect</th></tr>
 *   <tr><td>{@code MC_TCP_STATUS_TIMEOUT_SEC}</td><td>30</td><td>deadline for a v2 status frame</td></tr>
 *   <tr><td>{@code MC_TCP_LANES_PER_PEER} ({@code MC_TCP_MAX_CONNECTIONS_PER_PEER})</td><td>4</td>
 *       <td>persistent connections per peer, 1–16</td></tr>
 *   <tr><td>{@code MC_TCP_PROTO}</td><td>—</td><td>{@code 1} forces v1 framing ({@link #forceV1()})</td></tr>
 *   <tr><td>{@code MC_TRANSFER_TIMEOUT}</td><td>30</td><td>synchronous batch deadline: max(5, value) s + 1 ns/byte (parsed by {@link EngineSettings#transferTimeoutMs})</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_WINDOW}</td><td>32</td><td>requests pipelined per lane, 1–1024</td></tr>
 *   <tr><td>{@code MOONCAKE4J_UNREGISTER_WAIT_MS}</td><td>5000</td><td>how long unregistration waits for in-flight transfers before aborting them</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC}</td><td>300</td><td>data port: a connection with no byte
 *       moved for this long is closed</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_DATA_MAX_CONNECTIONS}</td><td>4096</td><td>data port: connections open at once;
 *       one more closes the longest-idle one, or is closed itself when none is idle</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_PEER_IDLE_TIMEOUT_SEC}</td><td>60</td><td>initiator: a peer (its lanes and their
 *       threads) unused for this long is closed; reopened on the next transfer. Keep it below the peers'
 *       data idle timeout</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_MAX_PEERS}</td><td>256</td><td>initiator: peers (distinct resolved data
 *       addresses) with live lanes at once; one more closes the longest-idle one, or fails its transfer when
 *       none is idle</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_MAX_SEGMENTS}</td><td>4096</td><td>initiator: distinct segment names
 *       {@code openSegment} accepts (aliases included); more return -1</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_GATHER}</td><td>1</td><td>{@code 0} turns off gathering writes (several
 *       requests and their bodies in one {@code sendmsg}, bodies not copied); they also need
 *       {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED}, else one write per header run and per body</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_STAGING_*}</td><td></td><td>GPU-memory staging ({@link StagingConfig})</td></tr>
 * </table>
 *
 * @param handshake        the control-plane settings (ports, frame limit, timeouts)
 * @param dataListen       where the data port is bound; Mooncake uses the RPC port's random range
 *                         ({@code handshake}), tests may bind it elsewhere
 * @param statusTimeoutMs  {@code MC_TCP_STATUS_TIMEOUT_SEC} in ms
 * @param lanesPerPeer     connections per peer
 * @param window           requests in flight per lane (pipelining depth)
 * @param transferTimeoutMs base of the synchronous deadline (already at least 5 s)
 * @param unregisterWaitMs bound of the wait for in-flight transfers when unregistering
 * @param dataIdleTimeoutMs data port: idle connections are closed after this long
 * @param maxDataConnections data port: connections open at once
 * @param peerIdleTimeoutMs initiator: unused peers are closed after this long
 * @param maxPeers         initiator: peers with live lanes at once
 * @param maxSegments      initiator: distinct names {@code openSegment} accepts
 * @param gatherWrites     {@code MOONCAKE4J_TCP_GATHER}: gathering writes where the JVM allows them
 * @param forceV1          {@code MC_TCP_PROTO=1}: v1 framing towards every peer, even one that offers v2.
 *                         Mooncake re-reads the variable per request; a Java process's environment
 *                         cannot change after start, so reading it once is equivalent
 * @param staging          GPU-memory staging ({@code MOONCAKE4J_TCP_STAGING_*})
 */
public record TcpConfig(HandshakeConfig handshake, HandshakeConfig dataListen, int statusTimeoutMs, int lanesPerPeer, int window,
        long transferTimeoutMs, long unregisterWaitMs, long dataIdleTimeoutMs, int maxDataConnections,
        long peerIdleTimeoutMs, int maxPeers, int maxSegments, boolean gatherWrites, boolean forceV1,
        StagingConfig staging) {

    private static final Logger LOG = LoggerFactory.getLogger(TcpConfig.class);

    public static final long DEFAULT_DATA_IDLE_TIMEOUT_MS = 300_000;
    public static final int DEFAULT_MAX_DATA_CONNECTIONS = 4096;
    public static final long DEFAULT_PEER_IDLE_TIMEOUT_MS = 60_000;
    public static final int DEFAULT_MAX_PEERS = 256;
    public static final int DEFAULT_MAX_SEGMENTS = 4096;

    /** The settings with the default data-port and peer limits. */
    public TcpConfig(HandshakeConfig handshake, HandshakeConfig dataListen, int statusTimeoutMs, int lanesPerPeer,
            int window, long transferTimeoutMs, long unregisterWaitMs) {
        this(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs, unregisterWaitMs,
                DEFAULT_DATA_IDLE_TIMEOUT_MS, DEFAULT_MAX_DATA_CONNECTIONS, DEFAULT_PEER_IDLE_TIMEOUT_MS,
                DEFAULT_MAX_PEERS, DEFAULT_MAX_SEGMENTS, true, false, StagingConfig.DEFAULTS);
    }

    public TcpConfig {
        java.util.Objects.requireNonNull(handshake, "handshake");
        java.util.Objects.requireNonNull(dataListen, "dataListen");
        java.util.Objects.requireNonNull(staging, "staging");
        if (statusTimeoutMs < 1 || lanesPerPeer < 1 || lanesPerPeer > 16 || window < 1 || window > 1024
                || transferTimeoutMs < 1 || unregisterWaitMs < 0 || dataIdleTimeoutMs < 1 || maxDataConnections < 1
                || peerIdleTimeoutMs < 1 || maxPeers < 1 || maxSegments < 1) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "bad TCP settings: status timeout %d ms, %d lanes, window %d, transfer timeout %d ms, "
                            + "data idle timeout %d ms, %d data connections, peer idle timeout %d ms, %d peers, "
                            + "%d segments", statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs, dataIdleTimeoutMs,
                    maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments));
        }
    }

    /** The engine's settings applied: its handshake settings, transfer timeout and environment snapshot. */
    public static TcpConfig fromSettings(EngineSettings settings) {
        return fromEnvironment(settings.environment(), settings.handshake());
    }

    /** Mooncake's defaults with {@code env} applied. */
    public static TcpConfig fromEnvironment(Map<String, String> env) {
        return fromEnvironment(env, HandshakeConfig.fromEnvironment(env));
    }

    /** {@code env} applied on top of an explicit control-plane config (tests use ephemeral ports). */
    public static TcpConfig fromEnvironment(Map<String, String> env, HandshakeConfig handshake) {
        int status = intVar(env, "MC_TCP_STATUS_TIMEOUT_SEC", null, 30, 1, 3600);
        int lanes = intVar(env, "MC_TCP_LANES_PER_PEER", "MC_TCP_MAX_CONNECTIONS_PER_PEER", 4, 1, 16);
        int window = intVar(env, "MOONCAKE4J_TCP_WINDOW", null, 32, 1, 1024);
        int unreg = intVar(env, "MOONCAKE4J_UNREGISTER_WAIT_MS", null, 5000, 0, Integer.MAX_VALUE);
        int dataIdle = intVar(env, "MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC", null,
                (int) (DEFAULT_DATA_IDLE_TIMEOUT_MS / 1000), 1, 86_400);
        int dataConns = intVar(env, "MOONCAKE4J_TCP_DATA_MAX_CONNECTIONS", null, DEFAULT_MAX_DATA_CONNECTIONS, 1,
                1 << 20);
        int peerIdle = intVar(env, "MOONCAKE4J_TCP_PEER_IDLE_TIMEOUT_SEC", null,
                (int) (DEFAULT_PEER_IDLE_TIMEOUT_MS / 1000), 1, 86_400);
        int peers = intVar(env, "MOONCAKE4J_TCP_MAX_PEERS", null, DEFAULT_MAX_PEERS, 1, 65_536);
        int segs = intVar(env, "MOONCAKE4J_TCP_MAX_SEGMENTS", null, DEFAULT_MAX_SEGMENTS, 1, 1 << 20);
        boolean gather = intVar(env, "MOONCAKE4J_TCP_GATHER", null, 1, 0, 1) == 1;
        boolean forceV1 = "1".equals(env.get("MC_TCP_PROTO"));
        return new TcpConfig(handshake, handshake, status * 1000, lanes, window, EngineSettings.transferTimeoutMs(env), unreg,
                dataIdle * 1000L, dataConns, peerIdle * 1000L, peers, segs, gather, forceV1,
                StagingConfig.fromEnvironment(env));
    }

    /** A copy with other data-port limits (tests). */
    public TcpConfig withDataLimits(long dataIdleTimeoutMs, int maxDataConnections) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with other initiator peer limits (tests). */
    public TcpConfig withPeerLimits(long peerIdleTimeoutMs, int maxPeers, int maxSegments) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with another control-plane config (tests). */
    public TcpConfig withHandshake(HandshakeConfig handshake) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with other timeouts (tests). */
    public TcpConfig withTimeouts(int statusTimeoutMs, long transferTimeoutMs) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with another lane count and window (tests, benchmarks). */
    public TcpConfig withLanes(int lanesPerPeer, int window) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with another unregistration wait (tests). */
    public TcpConfig withUnregisterWait(long ms) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs, ms,
                dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    /** A copy with gathering writes on or off ({@code MOONCAKE4J_TCP_GATHER}). */
    public TcpConfig withGatherWrites(boolean on) {
        return new TcpConfig(handshake, dataListen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                on, forceV1, staging);
    }

    /** A copy whose data port is bound per {@code listen} instead of the RPC port's range (tests). */
    public TcpConfig withDataListen(HandshakeConfig listen) {
        return new TcpConfig(handshake, listen, statusTimeoutMs, lanesPerPeer, window, transferTimeoutMs,
                unregisterWaitMs, dataIdleTimeoutMs, maxDataConnections, peerIdleTimeoutMs, maxPeers, maxSegments,
                gatherWrites, forceV1, staging);
    }

    private static int intVar(Map<String, String> env, String name, String alias, int def, int min, int max) {
        String v = env.get(name);
        if (v == null && alias != null) {
            v = env.get(alias);
            if (v != null) {
                LOG.warn("{} is deprecated; use {}", alias, name);
            }
        }
        if (v == null || v.isBlank()) {
            return def;
        }
        try {
            int i = Integer.parseInt(v.trim());
            if (i < min || i > max) {
                LOG.warn("ignoring {}={}: must be {}-{}; using {}", name, v, min, max, def);
                return def;
            }
            return i;
        } catch (NumberFormatException e) {
            LOG.warn("ignoring {}='{}': not an integer; using {}", name, v, def);
            return def;
        }
    }
}
