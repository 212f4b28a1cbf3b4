package io.mooncake4j.engine;

import io.mooncake4j.engine.cudaipc.CudaIpcTransport;
import io.mooncake4j.engine.internal.CoreEngine;
import io.mooncake4j.engine.rdma.RdmaTransport;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransferEngine;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.util.List;
import java.util.Locale;

/**
 * Creates engines by kind. The kind is what {@code bin/mooncake4j --engine} and embedders pass:
 * {@code "mock"} is the in-JVM {@link ScriptedTransferEngine}; {@code "tcp"} is the engine core
 * with the tcp transport only ({@link TcpTransferEngine}), wire-compatible with Mooncake's TCP
 * transport in P2P-handshake mode; {@code "auto"}, {@code "rdma"} and {@code "shm"} are the engine
 * core with every transport (cuda-ipc, shm, rdma, tcp), of which {@code initialize}'s {@code protocol}
 * installs ({@code "tcp"}: tcp; {@code "rdma"}: rdma and tcp; {@code "shm"}: shm and tcp;
 * {@code "auto"}/{@code ""}: all that can run here, rdma only where a device is usable, cuda-ipc only
 * where an NVIDIA driver is) and
 * {@code MC_TRANSPORTS} restricts; each request then goes over the cheapest transport that
 * reaches its peer, falling back to the next on failure. All are configured from Mooncake's
 * {@code MC_*} environment variables.
 */
public final class TransferEngines {

    private TransferEngines() {}

    /** {@return the kinds {@link #create} accepts} */
    public static List<String> kinds() {
        return List.of("mock", "tcp", "rdma", "shm", "auto");
    }

    /**
     * Creates an engine; the caller owns it and must close it.
     *
     * @param kind one of {@link #kinds()}, in any case
     * @return a new, uninitialised engine of that kind
     * @throws TransferEngineException for an unknown kind
     */
    public static TransferEngine create(String kind) {
        return switch (kind.toLowerCase(Locale.ROOT)) {
            case "mock" -> new ScriptedTransferEngine().copyData(true).recordCalls(false);
            case "tcp" -> new TcpTransferEngine();
            case "rdma", "shm", "auto" -> allTransports();
            default -> throw new TransferEngineException(String.format(Locale.ROOT,
                    "unknown engine kind '%s'; available: %s", kind, kinds()));
        };
    }

    /** The core offering cuda-ipc, shm, rdma (over libibverbs) and tcp. */
    private static TransferEngine allTransports() {
        TcpConfig tcp = TcpConfig.fromEnvironment();
        return new CoreEngine(TcpTransport.coreSettings(tcp), List.of(
                new CoreEngine.Candidate(CudaIpcTransport.NAME, CudaIpcTransport::new, CudaIpcTransport::autoPrecheck),
                new CoreEngine.Candidate("shm", ShmTransport::new),
                new CoreEngine.Candidate("rdma", RdmaTransport::new, RdmaTransport::autoPrecheck),
                new CoreEngine.Candidate("tcp", () -> new TcpTransport(tcp))), System.getenv());
    }

    /**
     * Why the last {@code initialize} of an engine made here failed, in words that name the cause
     * and the fix (for RDMA: no devices / ENOSYS / libibverbs missing, suggesting {@code "tcp"}),
     * or null when the engine keeps no such message. CLI commands print it and exit non-zero.
     *
     * @param engine an engine made by {@link #create}
     * @return the message of the last failed {@code initialize}, or null
     */
    public static String lastError(TransferEngine engine) {
        return engine instanceof CoreEngine c ? c.lastError() : null;
    }
}
