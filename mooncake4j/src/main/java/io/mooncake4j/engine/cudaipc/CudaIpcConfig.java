package io.mooncake4j.engine.cudaipc;

import java.util.Locale;
import java.util.Map;

/**
 * Settings of the cuda-ipc transport, parsed once from the engine's environment snapshot
 * ({@link CudaIpcTransportProvider} builds it; the transport never sees the variables).
 *
 * @param maxHandles IPC handles opened per peer ({@value CudaIpcTransport#MAX_HANDLES_ENV}, default
 *                   {@value CudaIpcTransport#DEFAULT_MAX_HANDLES}); further allocations of that peer go
 *                   to the next transport
 * @param problem    why the variable was refused, or null: a bad value does not stop the engine from
 *                   being built, it fails the transport's install with this message (the other
 *                   transports carry on), as when the variable was read at install
 */
public record CudaIpcConfig(int maxHandles, String problem) {

    /** The defaults. */
    public static final CudaIpcConfig DEFAULTS = new CudaIpcConfig(CudaIpcTransport.DEFAULT_MAX_HANDLES, null);

    public CudaIpcConfig {
        if (maxHandles < 1) {
            throw new IllegalArgumentException("maxHandles must be positive: " + maxHandles);
        }
    }

    /** {@value CudaIpcTransport#MAX_HANDLES_ENV} from {@code env}: a positive integer, else a {@link #problem()}. */
    public static CudaIpcConfig fromEnvironment(Map<String, String> env) {
        String v = env.get(CudaIpcTransport.MAX_HANDLES_ENV);
        if (v == null || v.isBlank()) {
            return DEFAULTS;
        }
        try {
            int n = Integer.parseInt(v.strip());
            if (n > 0) {
                return new CudaIpcConfig(n, null);
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        return new CudaIpcConfig(CudaIpcTransport.DEFAULT_MAX_HANDLES, String.format(Locale.ROOT,
                "%s=%s: expected a positive number of IPC handles per peer (default %d)",
                CudaIpcTransport.MAX_HANDLES_ENV, v, CudaIpcTransport.DEFAULT_MAX_HANDLES));
    }
}
