package io.mooncake4j.engine.core;

import io.mooncake4j.engine.handshake.HandshakeConfig;
import java.util.Objects;

/**
 * The engine core's own settings (each transport keeps its own record).
 *
 * @param handshake         the handshake port and client (ports, frame limit, timeouts)
 * @param transferTimeoutMs {@code MC_TRANSFER_TIMEOUT} in ms: base of a synchronous call's deadline
 * @param maxSegments       distinct segment names {@code openSegment} accepts (aliases included);
 *                          more return -1 ({@code MOONCAKE4J_TCP_MAX_SEGMENTS})
 */
public record CoreSettings(HandshakeConfig handshake, long transferTimeoutMs, int maxSegments) {

    /** Default of {@link #maxSegments()}. */
    public static final int DEFAULT_MAX_SEGMENTS = 4096;

    /**
     * From the environment: the handshake settings ({@link HandshakeConfig#fromEnvironment()}) and
     * {@code MC_TRANSFER_TIMEOUT} (seconds, default 30, at least 5) as the TCP transport reads them.
     */
    public static CoreSettings fromEnvironment() {
        long seconds = 30;
        String v = System.getenv("MC_TRANSFER_TIMEOUT");
        if (v != null && !v.isBlank()) {
            try {
                seconds = Long.parseLong(v.strip());
            } catch (NumberFormatException e) {
                seconds = 30;
            }
        }
        return new CoreSettings(HandshakeConfig.fromEnvironment(), Math.max(5, seconds) * 1000L, DEFAULT_MAX_SEGMENTS);
    }

    public CoreSettings {
        Objects.requireNonNull(handshake, "handshake");
        if (transferTimeoutMs < 1 || maxSegments < 1) {
            throw new IllegalArgumentException("bad core settings: transfer timeout " + transferTimeoutMs
                    + " ms, " + maxSegments + " segments");
        }
    }
}
