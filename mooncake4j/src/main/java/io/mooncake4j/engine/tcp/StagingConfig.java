package io.mooncake4j.engine.tcp;

import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Settings of GPU-memory staging in the TCP transport, parsed with the rest of {@link TcpConfig}
 * from the engine's environment snapshot.
 *
 * <table>
 *   <caption>Variables honoured</caption>
 *   <tr><th>Variable</th><th>Default</th><th>Effect</th></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_STAGING_BUFFER_KB}</td><td>1024</td><td>size of one pinned bounce buffer, 4 KiB–64 MiB</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_STAGING_DEPTH}</td><td>4</td><td>bounce buffers per stager (copies in flight), 2–64</td></tr>
 *   <tr><td>{@code MOONCAKE4J_TCP_STAGING_SHARED}</td><td>8</td><td>stagers shared by the data port's sessions and local copies, 1–1024</td></tr>
 * </table>
 *
 * @param bufferBytes bytes per bounce buffer
 * @param depth       bounce buffers (and completion points) per stager
 * @param shared      stagers in the engine's shared pool; a session or local copy that finds none
 *                    free waits (back-pressure)
 */
public record StagingConfig(int bufferBytes, int depth, int shared) {

    private static final Logger LOG = LoggerFactory.getLogger(StagingConfig.class);

    /** The defaults: 1 MiB buffers, depth 4, 8 shared. */
    public static final StagingConfig DEFAULTS = new StagingConfig(1024 * 1024, 4, 8);

    public StagingConfig {
        if (bufferBytes < 1 || depth < 1 || shared < 1) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "bad staging settings: %d-byte buffers, depth %d, %d shared", bufferBytes, depth, shared));
        }
    }

    /** {@code env}'s {@code MOONCAKE4J_TCP_STAGING_*} applied on top of the defaults. */
    public static StagingConfig fromEnvironment(Map<String, String> env) {
        int kb = intVar(env, "MOONCAKE4J_TCP_STAGING_BUFFER_KB", 1024, 4, 64 * 1024);
        int depth = intVar(env, "MOONCAKE4J_TCP_STAGING_DEPTH", 4, 2, 64);
        int shared = intVar(env, "MOONCAKE4J_TCP_STAGING_SHARED", 8, 1, 1024);
        return new StagingConfig(kb * 1024, depth, shared);
    }

    private static int intVar(Map<String, String> env, String name, int def, int min, int max) {
        String v = env.get(name);
        if (v == null || v.isBlank()) {
            return def;
        }
        try {
            int i = Integer.parseInt(v.trim());
            if (i >= min && i <= max) {
                return i;
            }
            LOG.warn("ignoring {}={}: must be {}-{}; using {}", name, v, min, max, def);
        } catch (NumberFormatException e) {
            LOG.warn("ignoring {}='{}': not an integer; using {}", name, v, def);
        }
        return def;
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "%d x %d KiB pinned bounce buffers per stager, %d shared", depth,
                bufferBytes / 1024, shared);
    }
}
