package io.mooncake4j.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.tcp.TcpTransferEngine;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link TransferEngine} that counts what this side asks of the engine it wraps, for any engine:
 *
 * <table>
 *   <caption>Counters (Prometheus renders them with {@code _total})</caption>
 *   <tr><th>name</th><th>tags</th><th>counts</th></tr>
 *   <tr><td>{@value #TRANSFERS}</td><td>{@code op=read|write}</td><td>transfer requests (descriptors) handed to the engine,
 *       by the synchronous calls and by {@code submitTransfer}</td></tr>
 *   <tr><td>{@value #BYTES}</td><td>{@code op}</td><td>their bytes, once they succeeded</td></tr>
 *   <tr><td>{@value #FAILURES}</td><td>{@code api=sync|batch}</td><td>synchronous batches that returned non-zero;
 *       submitted tasks seen FAILED, TIMEOUT or CANCELED (once each)</td></tr>
 *   <tr><td>{@value #LIMITS_HIT}</td><td>—</td><td>submissions refused because the batch was full
 *       ({@link StatusCodes#TOO_MANY_REQUESTS})</td></tr>
 *   <tr><td>{@value #REJECTED_REQUESTS}</td><td>{@code server=data}</td><td>the TCP engine only
 *       ({@code TransferEngines.create("tcp")}): requests from peers its data port rejected (outside
 *       registered memory, bad opcode)</td></tr>
 * </table>
 *
 * <p>Other refusals of the engine's own servers (handshake connections over their bound, the
 * per-peer connection cap) are logged by the engine but not yet readable from outside it.
 * {@code TransferEngines.lastError} does not see through the wrapper: ask the wrapped
 * engine ({@link #delegate()}). Thread-safe as the wrapped engine is; closing closes it.
 */
public final class MeteredTransferEngine implements TransferEngine {

    /** Counter of transfer requests handed to the engine. */
    public static final String TRANSFERS = "mooncake4j.engine.transfers";
    /** Counter of the bytes of the transfer requests that succeeded. */
    public static final String BYTES = "mooncake4j.engine.bytes";
    /** Counter of failed transfers. */
    public static final String FAILURES = "mooncake4j.engine.failures";
    /** Counter of submissions refused because the batch was full. */
    public static final String LIMITS_HIT = "mooncake4j.engine.limits.hit";
    /** Function counter of the requests the TCP data port rejected. */
    public static final String REJECTED_REQUESTS = "mooncake4j.engine.rejected.requests";

    private final TransferEngine delegate;
    private final Counter readTransfers;
    private final Counter writeTransfers;
    private final Counter readBytes;
    private final Counter writeBytes;
    private final Counter syncFailures;
    private final Counter batchFailures;
    private final Counter limitsHit;
    /** Per batch: the submitted requests (to count their bytes) and the tasks already counted. */
    private final Map<Long, Batch> batches = new ConcurrentHashMap<>();

    private static final class Batch {
        final java.util.ArrayList<TransferRequest> requests = new java.util.ArrayList<>();
        final BitSet counted = new BitSet();
    }

    /**
     * Wraps {@code delegate}, registering the counters in {@code registry} with {@code tags}.
     *
     * @param delegate the engine to wrap; closing this closes it
     * @param registry the registry the counters are registered in
     * @param tags     tags every meter carries (for example the engine id and TP rank)
     */
    public MeteredTransferEngine(TransferEngine delegate, MeterRegistry registry, Iterable<Tag> tags) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
        Objects.requireNonNull(registry, "registry");
        Tags t = Tags.of(Objects.requireNonNull(tags, "tags"));
        readTransfers = counter(registry, TRANSFERS, t.and("op", "read"), "transfer requests handed to the engine");
        writeTransfers = counter(registry, TRANSFERS, t.and("op", "write"), "transfer requests handed to the engine");
        readBytes = counter(registry, BYTES, t.and("op", "read"), "bytes of the transfer requests that succeeded");
        writeBytes = counter(registry, BYTES, t.and("op", "write"), "bytes of the transfer requests that succeeded");
        syncFailures = counter(registry, FAILURES, t.and("api", "sync"), "failed transfers");
        batchFailures = counter(registry, FAILURES, t.and("api", "batch"), "failed transfers");
        limitsHit = counter(registry, LIMITS_HIT, t, "submissions refused because the batch was full");
        if (delegate instanceof TcpTransferEngine tcp) {
            FunctionCounter.builder(REJECTED_REQUESTS, tcp, TcpTransferEngine::rejectedDataRequests)
                    .tags(t.and("server", "data"))
                    .description("requests from peers the data port rejected (outside registered memory, bad opcode)")
                    .register(registry);
        }
    }

    private static Counter counter(MeterRegistry r, String name, Tags tags, String description) {
        return Counter.builder(name).tags(tags).description(description).register(r);
    }

    /** {@return the wrapped engine} */
    public TransferEngine delegate() {
        return delegate;
    }

    @Override
    public int initialize(String localHostname, String metadataServer, String protocol, String deviceName) {
        return delegate.initialize(localHostname, metadataServer, protocol, deviceName);
    }

    @Override
    public int getRpcPort() {
        return delegate.getRpcPort();
    }

    @Override
    public String getLocalSegmentName() {
        return delegate.getLocalSegmentName();
    }

    @Override
    public String protocol() {
        return delegate.protocol();
    }

    @Override
    public int registerMemory(long address, long length, String location) {
        return delegate.registerMemory(address, length, location);
    }

    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        return delegate.deviceMemoryAccess(location);
    }

    @Override
    public int batchRegisterMemory(long[] addresses, long[] lengths) {
        return delegate.batchRegisterMemory(addresses, lengths);
    }

    @Override
    public int unregisterMemory(long address) {
        return delegate.unregisterMemory(address);
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        return delegate.batchUnregisterMemory(addresses);
    }

    @Override
    public int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths) {
        return sync(true, lengths, delegate.batchTransferSyncWrite(targetSession, src, dst, lengths));
    }

    @Override
    public int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths) {
        return sync(false, lengths, delegate.batchTransferSyncRead(targetSession, local, remote, lengths));
    }

    private int sync(boolean write, long[] lengths, int code) {
        int n = lengths == null ? 0 : lengths.length;
        (write ? writeTransfers : readTransfers).increment(n);
        if (code == 0) {
            long bytes = 0;
            for (int i = 0; i < n; i++) {
                bytes += Math.max(0, lengths[i]);
            }
            (write ? writeBytes : readBytes).increment(bytes);
        } else {
            syncFailures.increment();
        }
        return code;
    }

    @Override
    public long openSegment(String segmentName) {
        return delegate.openSegment(segmentName);
    }

    @Override
    public long getFirstBufferAddress(String segmentName) {
        return delegate.getFirstBufferAddress(segmentName);
    }

    @Override
    public long allocateBatchId(int capacity) {
        long id = delegate.allocateBatchId(capacity);
        if (id >= 0) {
            batches.put(id, new Batch());
        }
        return id;
    }

    @Override
    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        int code = delegate.submitTransfer(batchId, requests);
        if (code == StatusCodes.TOO_MANY_REQUESTS) {
            limitsHit.increment();
        }
        if (code == 0 && requests != null) {
            Batch b = batches.computeIfAbsent(batchId, k -> new Batch());
            synchronized (b) {
                b.requests.addAll(requests);
            }
            for (TransferRequest r : requests) {
                (r.opcode() == TransferRequest.Opcode.WRITE ? writeTransfers : readTransfers).increment();
            }
        }
        return code;
    }

    @Override
    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        TransferStatus s = delegate.getTransferStatus(batchId, taskIndex);
        Batch b = batches.get(batchId);
        if (b != null && s.state().isTerminal()) {
            TransferRequest r;
            synchronized (b) {
                if (taskIndex < 0 || taskIndex >= b.requests.size() || b.counted.get(taskIndex)) {
                    return s;
                }
                b.counted.set(taskIndex);
                r = b.requests.get(taskIndex);
            }
            if (s.state() == TransferStatus.State.COMPLETED) {
                (r.opcode() == TransferRequest.Opcode.WRITE ? writeBytes : readBytes).increment(r.length());
            } else {
                batchFailures.increment();
            }
        }
        return s;
    }

    @Override
    public int freeBatchId(long batchId) {
        int code = delegate.freeBatchId(batchId);
        if (code == 0) {
            batches.remove(batchId);
        }
        return code;
    }

    @Override
    public void close() {
        delegate.close();
    }
}
