package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import java.util.List;

/**
 * The engine core ({@link CoreEngine}) with only the {@code tcp} transport ({@link TcpTransport}):
 * wire-compatible with the C++ Mooncake Transfer Engine's TCP transport ({@code protocol = "tcp"},
 * metadata server {@code P2PHANDSHAKE}). Obtain one with {@code TransferEngines.create("tcp")}. A
 * preset: it adds the TCP transport's monitoring getters, no engine-level code.
 *
 * <ul>
 *   <li>{@link #initialize} binds the RPC port and the data port at random in
 *       {@code [MC_MIN_RPC_PORT, MC_MAX_RPC_PORT]} and names the segment {@code host:rpcPort}.
 *       {@code protocol} is honoured explicitly (Mooncake's Python binding ignores it): {@code "tcp"}
 *       and {@code "auto"} work, {@code "rdma"} returns -1 with the reason.</li>
 *   <li>Unlike Mooncake's TCP transport, the local side of every transfer must lie in memory
 *       registered with this engine (the data path reads and writes it directly); other requests
 *       fail.</li>
 *   <li>GPU memory ({@code cuda:N}, or {@code *} detected by the {@link DeviceMemory}) is moved
 *       through pinned bounce buffers; without CUDA its registration fails with the cause
 *       ({@link #deviceMemoryAccess} says so beforehand).</li>
 * </ul>
 */
public final class TcpTransferEngine extends CoreEngine {

    /**
     * A notification received through the handshake port (Notify, type 2).
     *
     * @param name    the sender's name field
     * @param message the notification text
     */
    public record Notify(String name, String message) {}

    /** An engine configured from the environment ({@link TcpConfig#fromEnvironment()}). */
    public TcpTransferEngine() {
        this(TcpConfig.fromEnvironment());
    }

    /** An engine with explicit settings (tests use OS-assigned ports on 127.0.0.1); GPU memory through CUDA. */
    public TcpTransferEngine(TcpConfig config) {
        this(config, CudaDeviceMemory.INSTANCE);
    }

    /**
     * An engine with explicit settings whose GPU memory ({@code cuda:N} buffers) is reached through
     * {@code deviceMemory}. Staging settings come from the environment ({@code MOONCAKE4J_TCP_STAGING_*}).
     */
    public TcpTransferEngine(TcpConfig config, DeviceMemory deviceMemory) {
        this(config, deviceMemory, StagingConfig.fromEnvironment());
    }

    TcpTransferEngine(TcpConfig config, DeviceMemory deviceMemory, StagingConfig staging) {
        super(TcpTransport.coreSettings(config),
                List.of(new Candidate("tcp", () -> new TcpTransport(config, deviceMemory, staging))), System.getenv());
    }

    private TcpTransport tcp() {
        return (TcpTransport) transport("tcp");
    }

    /** The TCP data port advertised in the descriptor; 0 before initialisation. */
    public int getDataPort() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.dataPort();
    }

    /** Data-port requests rejected so far (outside registered memory, bad opcode); for monitoring. */
    public long rejectedDataRequests() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.rejectedDataRequests();
    }

    /** Drains the notifications received so far (Mooncake {@code getNotifies}). */
    public List<Notify> getNotifies() {
        return drainNotifies(Notify::new);
    }

    /** Bytes moved between GPU memory and sockets through bounce buffers so far. */
    public long stagedDeviceBytes() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.stagedBytes();
    }

    /** Failed GPU copies so far (each failed its transfer). */
    public long deviceCopyFailures() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.copyFailures();
    }

    /** Open data-port sessions (package-private, for tests). */
    int openDataSessionsForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.openDataSessions();
    }

    /** Data-port sessions closed for idleness so far (package-private, for tests). */
    long idleClosedDataSessionsForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.idleClosedDataSessions();
    }

    /** Peers with live lanes now (package-private, for tests). */
    int livePeersForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.livePeers();
    }

    /** Descriptor fetches in flight now (package-private, for tests). */
    int openingsInFlightForTest() {
        return openingsInFlight();
    }

    /** Peers closed so far for idleness or to make room (package-private, for tests). */
    long retiredPeersForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.retiredPeers();
    }

    /** Stagers (bounce-buffer sets) alive now (package-private, for tests). */
    int stagersForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.stagers();
    }

    /** Times a data-port session or local copy waited for a pooled stager (package-private, for tests). */
    long stagerWaitsForTest() {
        TcpTransport t = tcp();
        return t == null ? 0 : t.stagerWaits();
    }

}
