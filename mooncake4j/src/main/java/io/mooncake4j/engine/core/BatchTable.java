package io.mooncake4j.engine.core;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferStatus;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The batches of the asynchronous batch API, by id, with Mooncake's rules: ids are positive and
 * never reused; an unknown id or task is {@link StatusCodes#INVALID_ARGUMENT}; a batch can be
 * freed only once every task was observed terminal ({@link StatusCodes#BATCH_BUSY} otherwise).
 * Thread-safe.
 */
final class BatchTable {

    private final Map<Long, TaskBatch> batches = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);

    /** {@code allocateBatchId}: a new id, or {@link ErrorCodes#INVALID_ARGUMENT} for a non-positive capacity. */
    long allocate(int capacity) {
        if (capacity <= 0) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        long id = nextId.getAndIncrement();
        batches.put(id, new TaskBatch(id, capacity));
        return id;
    }

    /** The batch with this id, or null. */
    TaskBatch get(long id) {
        return batches.get(id);
    }

    /** {@code getTransferStatus}. */
    TransferStatus status(long id, int taskIndex) {
        TaskBatch b = batches.get(id);
        if (b == null || taskIndex < 0 || taskIndex >= b.size()) {
            return TransferStatus.invalid(StatusCodes.INVALID_ARGUMENT);
        }
        return b.status(taskIndex);
    }

    /** {@code freeBatchId}. */
    int free(long id) {
        TaskBatch b = batches.get(id);
        if (b == null) {
            return StatusCodes.INVALID_ARGUMENT;
        }
        if (!b.allObserved()) {
            return StatusCodes.BATCH_BUSY;
        }
        batches.remove(id);
        return StatusCodes.OK;
    }

    /** Every batch not yet freed (for shutdown). */
    Collection<TaskBatch> all() {
        return batches.values();
    }

    /**
     * Checks the arguments of a synchronous batch call: the three arrays non-null, of equal
     * length, no negative length. Returns the total byte count, or -1 when the call must fail.
     */
    static long checkedTotal(long[] local, long[] remote, long[] lengths) {
        if (local == null || remote == null || lengths == null
                || local.length != remote.length || local.length != lengths.length) {
            return -1;
        }
        long total = 0;
        for (long l : lengths) {
            if (l < 0) {
                return -1;
            }
            total += l;
        }
        return total;
    }
}
