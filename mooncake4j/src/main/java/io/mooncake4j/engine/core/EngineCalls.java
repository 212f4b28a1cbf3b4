package io.mooncake4j.engine.core;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The batch calls of the {@link io.mooncake4j.engine.TransferEngine} API that do not depend on
 * how bytes move: the asynchronous batch API over a {@link BatchTable}, the synchronous batch
 * calls (argument checks, segment opening, submission, deadline, abort) with the per-thread batch
 * they reuse, and segment-name normalisation. {@link CoreEngine} delegates its API methods here
 * and takes the steps only it can (opening a segment, submitting, aborting).
 *
 * <p>Thread-safe: its state is the batch table and a per-calling-thread batch.
 */
final class EngineCalls {

    private static final Logger LOG = LoggerFactory.getLogger(EngineCalls.class);
    /** The longest a synchronous call parks between checks of its batch (the deadline is checked each time). */
    private static final long MAX_PARK_NANOS = 50_000_000L;

    private final BatchTable batches = new BatchTable();
    private final CoreEngine engine;
    private final long transferTimeoutMs;
    /** Per calling thread, the batch of its last synchronous call, reused when it finished cleanly. */
    private final ThreadLocal<TaskBatch> syncBatch = new ThreadLocal<>();

    /** {@code transferTimeoutMs} ({@code MC_TRANSFER_TIMEOUT}) is the base of a synchronous call's deadline. */
    EngineCalls(CoreEngine engine, long transferTimeoutMs) {
        this.engine = engine;
        this.transferTimeoutMs = transferTimeoutMs;
    }

    /** The batches of the asynchronous API (for shutdown). */
    BatchTable batches() {
        return batches;
    }

    /**
     * A segment name as callers may pass it, normalised: leading slashes stripped (Mooncake's
     * Python helpers pass {@code "/host:port"} at times); null when nothing is left.
     */
    static String normalizedSegmentName(String name) {
        if (name == null) {
            return null;
        }
        int i = 0;
        while (i < name.length() && name.charAt(i) == '/') {
            i++;
        }
        return i == name.length() ? null : name.substring(i);
    }

    /**
     * Why {@code initialize} must refuse before binding anything, or null: the engine is closed or
     * already initialised, or the metadata server is neither {@code P2PHANDSHAKE} nor an
     * {@code http(s)://} URL of Mooncake's HTTP metadata protocol.
     */
    static String initializeRefusal(boolean closed, boolean initialized, String metadataServer) {
        if (closed || initialized) {
            return "initialize: engine already " + (closed ? "closed" : "initialized");
        }
        if (!io.mooncake4j.engine.TransferEngine.P2P_HANDSHAKE.equals(metadataServer) && !isHttp(metadataServer)) {
            return String.format(Locale.ROOT, "initialize: metadata server '%s' is not supported; only \"%s\""
                    + " (direct peer handshakes) or http://host:port/metadata (Mooncake's HTTP metadata server)",
                    metadataServer, io.mooncake4j.engine.TransferEngine.P2P_HANDSHAKE);
        }
        return null;
    }

    /** Whether {@code metadataServer} names an HTTP metadata server ({@code http://} or {@code https://}). */
    static boolean isHttp(String metadataServer) {
        if (metadataServer == null) {
            return false;
        }
        String m = metadataServer.toLowerCase(Locale.ROOT);
        return m.startsWith("http://") || m.startsWith("https://");
    }

    /** Why {@code initialize} refuses {@code localHostname}, or null. */
    static String hostnameRefusal(String localHostname) {
        return localHostname == null || localHostname.isBlank()
                ? "initialize: local hostname is empty; pass the IP or host name peers should connect to" : null;
    }

    long allocateBatchId(int capacity) {
        return engine.refusesCalls() ? ErrorCodes.INVALID_ARGUMENT : batches.allocate(capacity);
    }

    int submitTransfer(long batchId, List<TransferRequest> requests) {
        TaskBatch b = batches.get(batchId);
        if (b == null || requests == null) {
            return StatusCodes.INVALID_ARGUMENT;
        }
        UnpackedRequests u = UnpackedRequests.of(requests, TransferRequest.Opcode::wire);
        return engine.submit(b, u.size(), u.ops(), 0, u.targets(), 0, u.local(), u.remote(), u.lengths());
    }

    TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return batches.status(batchId, taskIndex);
    }

    int freeBatchId(long batchId) {
        return batches.free(batchId);
    }

    /**
     * {@code batchTransferSync{Write,Read}}: 0 when every descriptor was applied, -1 otherwise
     * (bad arguments, unknown segment, a failed or timed-out descriptor). The deadline is
     * {@code MC_TRANSFER_TIMEOUT} plus one nanosecond per byte.
     */
    int sync(String target, TransferRequest.Opcode op, long[] local, long[] remote, long[] lengths) {
        long total = BatchTable.checkedTotal(local, remote, lengths);
        if (engine.refusesCalls() || target == null || total < 0) {
            return -1;
        }
        long id = engine.openSegment(target);
        if (id < 0) {
            return -1;
        }
        int n = local.length;
        if (n == 0) {
            return 0;
        }
        TaskBatch b = syncBatch(n);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(transferTimeoutMs) + total;
        int rc = engine.submit(b, n, null, op.wire(), null, id, local, remote, lengths);
        if (rc != StatusCodes.OK) {
            engine.abort(b);
            return -1;
        }
        if (!b.await(deadline, MAX_PARK_NANOS)) {
            LOG.warn("{} of {} descriptors to {} timed out (MC_TRANSFER_TIMEOUT)",
                    op.name().toLowerCase(Locale.ROOT), n, target);
            engine.abort(b);
            return -1;
        }
        return b.allCompleted() ? 0 : -1;
    }

    /** A batch for one synchronous call of {@code n} tasks: this thread's last one when it finished cleanly, else a fresh one. */
    private TaskBatch syncBatch(int n) {
        TaskBatch b = syncBatch.get();
        if (b != null && b.capacity >= n && b.reset()) {
            return b;
        }
        b = new TaskBatch(-1, Math.max(n, 16));
        syncBatch.set(b);
        return b;
    }
}
