package io.mooncake4j.connector.worker;

import java.util.Objects;
import java.util.Set;

/**
 * What {@link MooncakeConnectorWorker#getTransferResults()} returns (vLLM's
 * {@code KVConnectorTransferResults}). Immutable; sets are never null.
 *
 * @param finishedSending P request ids whose blocks P may now free
 * @param finishedRecving D request ids whose load ended (received or failed)
 * @param failedRecving   D request ids whose load failed and that are reported per request
 *                        (models whose KV-cache groups are not all full attention; otherwise
 *                        failures are reported per block through
 *                        {@link MooncakeConnectorWorker#getBlockIdsWithLoadErrors()})
 */
public record KvConnectorTransferResults(Set<String> finishedSending, Set<String> finishedRecving,
        Set<String> failedRecving) {

    /** Keeps unmodifiable copies of the collections. */
    public KvConnectorTransferResults {
        finishedSending = Set.copyOf(Objects.requireNonNull(finishedSending, "finishedSending"));
        finishedRecving = Set.copyOf(Objects.requireNonNull(finishedRecving, "finishedRecving"));
        failedRecving = Set.copyOf(Objects.requireNonNull(failedRecving, "failedRecving"));
    }
}
