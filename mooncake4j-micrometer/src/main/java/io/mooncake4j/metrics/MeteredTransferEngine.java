package io.mooncake4j.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.ToLongFunction;

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
 * </table>
 *
 * <table>
 *   <caption>Function counters over the engine's own {@link TransferEngine#counters()} (read at
 *   each scrape; 0 for an engine that does not count them, such as {@code "mock"})</caption>
 *   <tr><th>name</th><th>tags</th><th>counts ({@link EngineCounters} field)</th></tr>
 *   <tr><td>{@value #REJECTED_REQUESTS}</td><td>{@code server=data}</td><td>requests from peers the TCP
 *       data port rejected: outside registered memory, bad opcode ({@code rejectedDataRequests})</td></tr>
 *   <tr><td>{@value #REJECTED_REQUESTS}</td><td>{@code server=handshake}</td><td>handshake (RPC port)
 *       connections dropped for malformed input ({@code rejectedHandshakes})</td></tr>
 *   <tr><td>{@value #CLOSED_CONNECTIONS}</td><td>{@code server=handshake, reason=cap}</td><td>handshake
 *       connections closed to make room at the connection cap ({@code evictedHandshakes})</td></tr>
 *   <tr><td>{@value #CLOSED_CONNECTIONS}</td><td>{@code server=handshake, reason=deadline}</td><td>handshake
 *       connections closed at the request deadline ({@code expiredHandshakes})</td></tr>
 *   <tr><td>{@value #CLOSED_CONNECTIONS}</td><td>{@code server=data, reason=idle}</td><td>TCP data-port
 *       connections closed idle, or to make room at their cap ({@code idleClosedDataSessions})</td></tr>
 *   <tr><td>{@value #CAP_REFUSALS}</td><td>{@code cap=segments}</td><td>{@code openSegment} refused at
 *       {@code MOONCAKE4J_TCP_MAX_SEGMENTS} open names ({@code segmentLimitHits})</td></tr>
 *   <tr><td>{@value #CAP_REFUSALS}</td><td>{@code cap=peers}</td><td>TCP peer connections not opened at
 *       {@code MOONCAKE4J_TCP_MAX_PEERS} busy peers ({@code peerLimitHits})</td></tr>
 *   <tr><td>{@value #FALLBACK_SLICES}</td><td>—</td><td>slices moved to another transport after a
 *       retryable failure ({@code fallbackSlices})</td></tr>
 *   <tr><td>{@value #UNROUTABLE_SLICES}</td><td>—</td><td>slices failed because no installed transport
 *       reaches the peer's buffer ({@code unroutableSlices})</td></tr>
 * </table>
 *
 * <p>{@code TransferEngines.lastError} does not see through the wrapper: ask the wrapped
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
    /**
     * Function counter of the requests (tag {@code server=data}) and handshake connections
     * ({@code server=handshake}) the engine's servers rejected.
     */
    public static final String REJECTED_REQUESTS = "mooncake4j.engine.rejected.requests";
    /** Function counter of the connections the engine's servers closed on their own (tags {@code server, reason}). */
    public static final String CLOSED_CONNECTIONS = "mooncake4j.engine.closed.connections";
    /** Function counter of the refusals at the segment and peer caps (tag {@code cap}). */
    public static final String CAP_REFUSALS = "mooncake4j.engine.cap.refusals";
    /** Function counter of the slices moved to another transport after a retryable failure. */
    public static final String FALLBACK_SLICES = "mooncake4j.engine.fallback.slices";
    /** Function counter of the slices no installed transport could route. */
    public static final String UNROUTABLE_SLICES = "mooncake4j.engine.unroutable.slices";

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
        engineCounter(registry, REJECTED_REQUESTS, t.and("server", "data"), EngineCounters::rejectedDataRequests,
                "requests from peers the TCP data port rejected (outside registered memory, bad opcode)");
        engineCounter(registry, REJECTED_REQUESTS, t.and("server", "handshake"), EngineCounters::rejectedHandshakes,
                "handshake connections dropped for malformed input");
        engineCounter(registry, CLOSED_CONNECTIONS, t.and("server", "handshake").and("reason", "cap"),
                EngineCounters::evictedHandshakes, "handshake connections closed to make room at the connection cap");
        engineCounter(registry, CLOSED_CONNECTIONS, t.and("server", "handshake").and("reason", "deadline"),
                EngineCounters::expiredHandshakes, "handshake connections closed at the request deadline");
        engineCounter(registry, CLOSED_CONNECTIONS, t.and("server", "data").and("reason", "idle"),
                EngineCounters::idleClosedDataSessions, "TCP data connections closed idle or to make room at the cap");
        engineCounter(registry, CAP_REFUSALS, t.and("cap", "segments"), EngineCounters::segmentLimitHits,
                "openSegment calls refused at the segment cap");
        engineCounter(registry, CAP_REFUSALS, t.and("cap", "peers"), EngineCounters::peerLimitHits,
                "TCP peer connections not opened at the peer cap");
        engineCounter(registry, FALLBACK_SLICES, t, EngineCounters::fallbackSlices,
                "slices moved to another transport after a retryable failure");
        engineCounter(registry, UNROUTABLE_SLICES, t, EngineCounters::unroutableSlices,
                "slices no installed transport could route");
    }

    private void engineCounter(MeterRegistry r, String name, Tags tags, ToLongFunction<EngineCounters> field,
            String description) {
        TransferEngine e = delegate;
        FunctionCounter.builder(name, e, x -> field.applyAsLong(x.counters()))
                .tags(tags).description(description).register(r);
    }

    private static Counter counter(MeterRegistry r, String name, Tags tags, String description) {
        return Counter.builder(name).tags(tags).description(description).register(r);
    }

    @Override
    public EngineCounters counters() {
        return delegate.counters();
    }

    @Override
    public java.util.Map<String, Long> bytesByTransport() {
        return delegate.bytesByTransport();
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
    public boolean isOwnSegment(String segmentName) {
        return delegate.isOwnSegment(segmentName);
    }

    @Override
    public boolean refusedAsOwnSegment(String segmentName) {
        return delegate.refusedAsOwnSegment(segmentName);
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
