package io.mooncake4j.connector.worker;

import java.util.Objects;
import java.util.Set;

/**
 * What {@link MooncakeConnectorWorker#getFinished()} returns (vLLM's {@code get_finished} pair,
 * with empty sets instead of {@code None}). Immutable.
 *
 * @param finishedSending P request ids whose blocks P may now free (sent, or expired)
 * @param finishedRecving D request ids whose load ended (received, or failed: see
 *                        {@link MooncakeConnectorWorker#getBlockIdsWithLoadErrors()})
 */
public record FinishedRequests(Set<String> finishedSending, Set<String> finishedRecving) {

    /** Keeps unmodifiable copies of the collections. */
    public FinishedRequests {
        finishedSending = Set.copyOf(Objects.requireNonNull(finishedSending, "finishedSending"));
        finishedRecving = Set.copyOf(Objects.requireNonNull(finishedRecving, "finishedRecving"));
    }

    /** {@return both sets empty} */
    public boolean isEmpty() {
        return finishedSending.isEmpty() && finishedRecving.isEmpty();
    }
}
