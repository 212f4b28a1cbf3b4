package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine's settings, read once from the environment when an engine is built: what the core
 * itself uses (the handshake port and client, the synchronous deadline, the segment cap) and the
 * environment snapshot each transport's settings record is built from, once per engine, in its
 * {@link TransportProvider#factory} ({@code TcpConfig} with its staging and framing settings,
 * {@code RdmaEngineConfig}, {@code CudaIpcConfig}); the transports get those typed records, never the
 * variables. {@link #processEnvironment()} is the library's one reader of this process's
 * {@code MC_*} and {@code MOONCAKE4J_*} engine variables; a Java process's environment cannot change
 * after start, so one snapshot is what every engine sees. {@code MC_TRANSFER_TIMEOUT} is parsed here
 * only ({@link #transferTimeoutMs(Map)}); the transports' configs take it from here. Immutable.
 *
 * @param handshake         the handshake port and client (ports, frame limit, timeouts)
 * @param transferTimeoutMs {@code MC_TRANSFER_TIMEOUT} in ms: base of a synchronous call's deadline
 * @param maxSegments       distinct segment names {@code openSegment} accepts (aliases included);
 *                          more return -1 ({@code MOONCAKE4J_TCP_MAX_SEGMENTS})
 * @param environment       the variables the transports and {@code MC_TRANSPORTS} are read from;
 *                          tests pass their own
 */
public record EngineSettings(HandshakeConfig handshake, long transferTimeoutMs, int maxSegments,
        Map<String, String> environment) {

    private static final Logger LOG = LoggerFactory.getLogger(EngineSettings.class);

    /** Default of {@link #maxSegments()}. */
    public static final int DEFAULT_MAX_SEGMENTS = 4096;
    /** Default of {@code MC_TRANSFER_TIMEOUT}, seconds. */
    public static final int DEFAULT_TRANSFER_TIMEOUT_S = 30;
    /** The least {@code MC_TRANSFER_TIMEOUT} honoured, seconds. */
    public static final int MIN_TRANSFER_TIMEOUT_S = 5;

    public EngineSettings {
        Objects.requireNonNull(handshake, "handshake");
        environment = Map.copyOf(Objects.requireNonNull(environment, "environment"));
        if (transferTimeoutMs < 1 || maxSegments < 1) {
            throw new IllegalArgumentException("bad engine settings: transfer timeout " + transferTimeoutMs
                    + " ms, " + maxSegments + " segments");
        }
    }

    /** This process's environment, read once: the only read of the engine's variables in the library. */
    public static Map<String, String> processEnvironment() {
        return ProcessEnvironment.SNAPSHOT;
    }

    /** Holds the snapshot, taken when first asked for. */
    private static final class ProcessEnvironment {
        static final Map<String, String> SNAPSHOT = Map.copyOf(System.getenv());
    }

    /** From this process's environment ({@link #processEnvironment()}). */
    public static EngineSettings fromEnvironment() {
        return fromEnvironment(processEnvironment());
    }

    /**
     * From {@code env}: the handshake settings ({@link HandshakeConfig#fromEnvironment(Map)}),
     * {@code MC_TRANSFER_TIMEOUT} and {@code MOONCAKE4J_TCP_MAX_SEGMENTS} (1 to 2^20, else the default).
     */
    public static EngineSettings fromEnvironment(Map<String, String> env) {
        int segments = DEFAULT_MAX_SEGMENTS;
        String s = env.get("MOONCAKE4J_TCP_MAX_SEGMENTS");
        if (s != null && !s.isBlank()) {
            try {
                int v = Integer.parseInt(s.strip());
                segments = v >= 1 && v <= 1 << 20 ? v : DEFAULT_MAX_SEGMENTS;
            } catch (NumberFormatException e) {
                segments = DEFAULT_MAX_SEGMENTS;
            }
        }
        return new EngineSettings(HandshakeConfig.fromEnvironment(env), transferTimeoutMs(env), segments, env);
    }

    /**
     * {@code MC_TRANSFER_TIMEOUT} (seconds; default 30, at least 5) in milliseconds; a value that
     * is not a number is the default, with one WARN. The one place this variable is parsed.
     */
    public static long transferTimeoutMs(Map<String, String> env) {
        long seconds = DEFAULT_TRANSFER_TIMEOUT_S;
        String v = env.get("MC_TRANSFER_TIMEOUT");
        if (v != null && !v.isBlank()) {
            try {
                seconds = Long.parseLong(v.strip());
            } catch (NumberFormatException e) {
                LOG.warn("MC_TRANSFER_TIMEOUT={} is not a number of seconds; using {}", v,
                        DEFAULT_TRANSFER_TIMEOUT_S);
                seconds = DEFAULT_TRANSFER_TIMEOUT_S;
            }
        }
        return Math.max(MIN_TRANSFER_TIMEOUT_S, seconds) * 1000L;
    }

    /** A copy with another environment (tests: {@code MC_TRANSPORTS}). */
    public EngineSettings withEnvironment(Map<String, String> env) {
        return new EngineSettings(handshake, transferTimeoutMs, maxSegments, env);
    }
}
