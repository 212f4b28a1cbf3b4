package io.mooncake4j.engine.core;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine-level half of the {@link io.mooncake4j.engine.TransferEngine} API that does not
 * depend on how bytes move, in one copy for every engine: the asynchronous batch API over a
 * {@link BatchTable}, the synchronous batch calls (argument checks, segment opening, submission,
 * deadline, abort), and segment-name normalisation. An engine supplies the transport-specific
 * steps through {@link Hooks} and delegates its API methods here.
 *
 * <p>Thread-safe: it holds no state of its own beyond the batch table.
 *
 * @param <B> the engine's batch type
 */
public final class EngineCalls<B extends TaskBatch> {

    private static final Logger LOG = LoggerFactory.getLogger(EngineCalls.class);

    /**
     * What an engine does that this class cannot.
     *
     * @param <B> the engine's batch type
     */
    public interface Hooks<B extends TaskBatch> {

        /** Whether the engine is closed (every call then fails). */
        boolean closed();

        /** The segment id of {@code name} (0 for the own segment), or -1. */
        long openSegment(String name);

        /** The engine's code for an opcode (what {@link TaskBatch#opcode} holds). */
        int opcode(TransferRequest.Opcode op);

        /**
         * Appends and starts tasks. {@code ops}/{@code targets} may be null, then {@code opAll}/
         * {@code targetAll} apply to every task. Returns a {@link StatusCodes} value.
         */
        int submit(B b, int n, int[] ops, int opAll, long[] targets, long targetAll, long[] local, long[] remote,
                long[] lens);

        /** A batch for one synchronous call of {@code n} tasks (fresh, or a finished one reused). */
        B syncBatch(int n);

        /** The synchronous call on {@code b} has returned (default: nothing to do). */
        default void syncDone(B b) {}

        /** Gives up on {@code b}: fails what is left and returns once no transport touches its memory. */
        void abort(B b);

        /** Waits until every task of {@code b} is terminal or the deadline passes; true when all are. */
        boolean await(B b, long deadlineNanos);

        /** {@code MC_TRANSFER_TIMEOUT} in milliseconds: the base of a synchronous call's deadline. */
        long transferTimeoutMs();
    }

    private final BatchTable<B> batches;
    private final Hooks<B> hooks;

    /** {@code factory} makes the engine's batches from an id and a capacity. */
    public EngineCalls(BiFunction<Long, Integer, B> factory, Hooks<B> hooks) {
        this.batches = new BatchTable<>(factory);
        this.hooks = hooks;
    }

    /** The batches of the asynchronous API (for shutdown). */
    public BatchTable<B> batches() {
        return batches;
    }

    /**
     * A segment name as callers may pass it, normalised: leading slashes stripped (Mooncake's
     * Python helpers pass {@code "/host:port"} at times); null when nothing is left.
     */
    public static String normalizedSegmentName(String name) {
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
     * already initialised, or the metadata server is not {@code P2PHANDSHAKE}.
     */
    public static String initializeRefusal(boolean closed, boolean initialized, String metadataServer) {
        if (closed || initialized) {
            return "initialize: engine already " + (closed ? "closed" : "initialized");
        }
        if (!io.mooncake4j.engine.TransferEngine.P2P_HANDSHAKE.equals(metadataServer)) {
            return String.format(Locale.ROOT, "initialize: metadata server '%s' is not supported; only \"%s\""
                    + " (direct peer handshakes)", metadataServer, io.mooncake4j.engine.TransferEngine.P2P_HANDSHAKE);
        }
        return null;
    }

    /** Why {@code initialize} refuses {@code localHostname}, or null. */
    public static String hostnameRefusal(String localHostname) {
        return localHostname == null || localHostname.isBlank()
                ? "initialize: local hostname is empty; pass the IP or host name peers should connect to" : null;
    }

    public long allocateBatchId(int capacity) {
        return hooks.closed() ? ErrorCodes.INVALID_ARGUMENT : batches.allocate(capacity);
    }

    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        B b = batches.get(batchId);
        if (b == null || requests == null) {
            return StatusCodes.INVALID_ARGUMENT;
        }
        UnpackedRequests u = UnpackedRequests.of(requests, hooks::opcode);
        return hooks.submit(b, u.size(), u.ops(), 0, u.targets(), 0, u.local(), u.remote(), u.lengths());
    }

    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return batches.status(batchId, taskIndex);
    }

    public int freeBatchId(long batchId) {
        return batches.free(batchId);
    }

    /**
     * {@code batchTransferSync{Write,Read}}: 0 when every descriptor was applied, -1 otherwise
     * (bad arguments, unknown segment, a failed or timed-out descriptor). The deadline is
     * {@code MC_TRANSFER_TIMEOUT} plus one nanosecond per byte.
     */
    public int sync(String target, TransferRequest.Opcode op, long[] local, long[] remote, long[] lengths) {
        long total = BatchTable.checkedTotal(local, remote, lengths);
        if (hooks.closed() || target == null || total < 0) {
            return -1;
        }
        long id = hooks.openSegment(target);
        if (id < 0) {
            return -1;
        }
        int n = local.length;
        if (n == 0) {
            return 0;
        }
        B b = hooks.syncBatch(n);
        try {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(hooks.transferTimeoutMs()) + total;
            int rc = hooks.submit(b, n, null, hooks.opcode(op), null, id, local, remote, lengths);
            if (rc != StatusCodes.OK) {
                hooks.abort(b);
                return -1;
            }
            if (!hooks.await(b, deadline)) {
                LOG.warn("{} of {} descriptors to {} timed out (MC_TRANSFER_TIMEOUT)",
                        op.name().toLowerCase(Locale.ROOT), n, target);
                hooks.abort(b);
                return -1;
            }
            return b.allCompleted() ? 0 : -1;
        } finally {
            hooks.syncDone(b);
        }
    }
}
