package io.mooncake4j.engine;

import io.mooncake4j.engine.rdma.ProtocolSelection;
import io.mooncake4j.engine.rdma.RdmaTransferEngine;
import io.mooncake4j.engine.tcp.TcpTransferEngine;
import java.util.List;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine of kind {@code "auto"}: {@link #initialize} resolves {@code protocol} with
 * {@link ProtocolSelection} and installs the TCP or the RDMA engine, then delegates everything to
 * it. {@code "tcp"} → TCP; {@code "rdma"} → RDMA, or -1 with the diagnosis (no devices, ENOSYS,
 * libibverbs missing; the message suggests {@code "tcp"}) on a machine without RDMA;
 * {@code "auto"}/{@code ""} → RDMA when a device is usable, else TCP with one WARN per JVM (as
 * Mooncake's auto-discovery). Before a successful {@link #initialize} every call fails.
 *
 * <p>Thread-safe: the delegate is published once through a volatile field.
 */
final class ProtocolSelectingEngine implements TransferEngine {

    private static final Logger LOG = LoggerFactory.getLogger(ProtocolSelectingEngine.class);

    private final Supplier<TransferEngine> tcp;
    private final Supplier<TransferEngine> rdma;
    private volatile TransferEngine delegate;
    private volatile String lastError;
    private volatile boolean closed;

    ProtocolSelectingEngine() {
        this(TcpTransferEngine::new, RdmaTransferEngine::new);
    }

    ProtocolSelectingEngine(Supplier<TransferEngine> tcp, Supplier<TransferEngine> rdma) {
        this.tcp = tcp;
        this.rdma = rdma;
    }

    /** The diagnosis of the last failed {@link #initialize}, or null. */
    String lastError() {
        TransferEngine d = delegate;
        if (d instanceof RdmaTransferEngine r && r.lastError() != null) {
            return r.lastError();
        }
        return lastError;
    }

    @Override
    public synchronized int initialize(String localHostname, String metadataServer, String protocol,
            String deviceName) {
        if (closed || delegate != null) {
            lastError = "initialize: engine already " + (closed ? "closed" : "initialized");
            LOG.error(lastError);
            return -1;
        }
        String chosen;
        try {
            chosen = ProtocolSelection.resolve(protocol, deviceName);
        } catch (TransferEngineException e) {
            lastError = "initialize(protocol \"" + protocol + "\"): " + e.getMessage();
            LOG.error(lastError);
            return -1;
        }
        TransferEngine e = chosen.equals(ProtocolSelection.RDMA) ? rdma.get() : tcp.get();
        int rc = e.initialize(localHostname, metadataServer, chosen, deviceName);
        if (rc != 0) {
            lastError = e instanceof RdmaTransferEngine r ? r.lastError() : "initialize failed; see the log";
            e.close();
            return rc;
        }
        delegate = e;
        return 0;
    }

    private TransferEngine d() {
        TransferEngine e = delegate;
        if (e == null) {
            throw new IllegalStateException("engine not initialized");
        }
        return e;
    }

    @Override
    public int getRpcPort() {
        TransferEngine e = delegate;
        return e == null ? 0 : e.getRpcPort();
    }

    @Override
    public String getLocalSegmentName() {
        TransferEngine e = delegate;
        return e == null ? null : e.getLocalSegmentName();
    }

    @Override
    public String protocol() {
        TransferEngine e = delegate;
        return e == null ? null : e.protocol();
    }

    @Override
    public int registerMemory(long address, long length, String location) {
        return delegate == null ? ErrorCodes.INVALID_ARGUMENT : d().registerMemory(address, length, location);
    }

    /** The installed engine's answer; {@link DeviceMemoryAccess.Kind#UNKNOWN} before initialisation. */
    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        TransferEngine e = delegate;
        return e == null ? DeviceMemoryAccess.unknown() : e.deviceMemoryAccess(location);
    }

    @Override
    public long getFirstBufferAddress(String segmentName) {
        TransferEngine e = delegate;
        return e == null ? -1 : e.getFirstBufferAddress(segmentName);
    }

    @Override
    public int batchRegisterMemory(long[] addresses, long[] lengths) {
        return delegate == null ? ErrorCodes.INVALID_ARGUMENT : d().batchRegisterMemory(addresses, lengths);
    }

    @Override
    public int unregisterMemory(long address) {
        return delegate == null ? ErrorCodes.ADDRESS_NOT_REGISTERED : d().unregisterMemory(address);
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        return delegate == null ? ErrorCodes.ADDRESS_NOT_REGISTERED : d().batchUnregisterMemory(addresses);
    }

    @Override
    public int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths) {
        return delegate == null ? -1 : d().batchTransferSyncWrite(targetSession, src, dst, lengths);
    }

    @Override
    public int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths) {
        return delegate == null ? -1 : d().batchTransferSyncRead(targetSession, local, remote, lengths);
    }

    @Override
    public long openSegment(String segmentName) {
        return delegate == null ? -1 : d().openSegment(segmentName);
    }

    @Override
    public long allocateBatchId(int capacity) {
        return delegate == null ? ErrorCodes.INVALID_ARGUMENT : d().allocateBatchId(capacity);
    }

    @Override
    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        return delegate == null ? StatusCodes.INVALID_ARGUMENT : d().submitTransfer(batchId, requests);
    }

    @Override
    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return delegate == null ? TransferStatus.invalid(StatusCodes.INVALID_ARGUMENT)
                : d().getTransferStatus(batchId, taskIndex);
    }

    @Override
    public int freeBatchId(long batchId) {
        return delegate == null ? StatusCodes.INVALID_ARGUMENT : d().freeBatchId(batchId);
    }

    @Override
    public synchronized void close() {
        closed = true;
        TransferEngine e = delegate;
        if (e != null) {
            e.close();
        }
    }
}
