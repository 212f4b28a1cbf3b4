package io.mooncake4j.sim;

import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * Merges the finished sets of an engine's tensor-parallel workers the way vLLM's
 * {@code KVOutputAggregator} does: a request id counts as finished sending (or receiving) once
 * every one of the {@code worldSize} workers has reported it, in this step or an earlier one;
 * failed loads and invalid block ids are the union over workers.
 *
 * <p>Not thread-safe: owned by the engine's step loop.
 */
public final class TpOutputAggregator {

    private final int worldSize;
    private final Map<String, Integer> sendingCounts = new HashMap<>();
    private final Map<String, Integer> recvingCounts = new HashMap<>();

    /** An aggregator for {@code worldSize} workers. */
    public TpOutputAggregator(int worldSize) {
        if (worldSize <= 0) {
            throw new IllegalArgumentException("worldSize must be positive, got " + worldSize);
        }
        this.worldSize = worldSize;
    }

    /**
     * Merges one step's results of all workers (one entry per worker).
     *
     * @return the ids that became finished in this step, and the union of failures
     */
    public SimWorker.TransferResults aggregate(Iterable<SimWorker.TransferResults> perWorker) {
        Set<String> sending = new LinkedHashSet<>();
        Set<String> recving = new LinkedHashSet<>();
        Set<String> failed = new HashSet<>();
        for (SimWorker.TransferResults r : perWorker) {
            count(r.finishedSending(), sendingCounts, sending);
            count(r.finishedRecving(), recvingCounts, recving);
            failed.addAll(r.failedRecving());
        }
        return new SimWorker.TransferResults(sending, recving, failed);
    }

    private void count(Set<String> ids, Map<String, Integer> counts, Set<String> done) {
        for (String id : ids) {
            int c = counts.merge(id, 1, Integer::sum);
            if (c >= worldSize) {
                counts.remove(id);
                done.add(id);
            }
        }
    }

    /** Request ids reported by some but not yet all workers (for diagnostics). */
    public int pendingCount() {
        return sendingCounts.size() + recvingCounts.size();
    }
}
