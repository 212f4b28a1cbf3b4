package io.mooncake4j.sim;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;

import java.util.Optional;
import java.util.Set;

/**
 * What {@link SimEngine}'s step loop calls on one tensor-parallel worker: exactly the worker-side
 * calls vLLM's model runner makes on its connector each step (spec §4, §6.12). The production
 * implementation wraps {@code MooncakeConnectorWorker} and its transfer engine
 * ({@link ConnectorSimWorker}); tests may substitute a fake.
 *
 * <p>Called from the engine's step-loop thread only.
 */
public interface SimWorker extends AutoCloseable {

    /** Hands this step's scheduler metadata to the worker; must not block on the network. */
    void startLoadKv(MooncakeConnectorMetadata metadata);

    /** vLLM's {@code save_kv_layer}: layer {@code layerName} of this step's KV is written (default: nothing). */
    default void saveKvLayer(String layerName) {}

    /** vLLM's {@code wait_for_save}: this step's forward pass ended (default: nothing). */
    default void waitForSave() {}

    /** vLLM's {@code get_transfer_results()}: what finished since the previous call (sets, never null). */
    TransferResults getTransferResults();

    /** vLLM's {@code get_block_ids_with_load_errors()}: D block ids whose load failed since the previous call. */
    Set<Integer> getBlockIdsWithLoadErrors();

    /** vLLM's {@code get_kv_connector_stats()}: the stats since the previous call, empty when none. */
    Optional<MooncakeKvConnectorStats> getKvConnectorStats();

    /**
     * Registers {@code wakeup} to run, on a connector thread, whenever {@link #getTransferResults()} or
     * {@link #getBlockIdsWithLoadErrors()} has something new (see
     * {@code MooncakeConnectorWorker.setFinishedListener}: cheap, non-blocking, possibly spurious,
     * run after the event is visible). Called once, before the step loop starts.
     *
     * @return true when this worker will call it; false (the default) when it cannot tell, and the
     *         engine then polls it every millisecond while it has work to report on
     */
    default boolean onFinished(Runnable wakeup) {
        return false;
    }

    /** Shuts the worker down and releases what it owns (idempotent). */
    @Override
    void close();

    /**
     * One worker's finished sets for one step.
     *
     * @param finishedSending P request ids whose KV was pushed to every D that needed it (or expired)
     * @param finishedRecving D request ids whose load ended, successfully or not
     * @param failedRecving   D request ids whose load failed (reported per request)
     */
    record TransferResults(Set<String> finishedSending, Set<String> finishedRecving, Set<String> failedRecving) {

        public TransferResults {
            finishedSending = Set.copyOf(finishedSending);
            finishedRecving = Set.copyOf(finishedRecving);
            failedRecving = Set.copyOf(failedRecving);
        }

        /** Nothing finished. */
        public static final TransferResults EMPTY = new TransferResults(Set.of(), Set.of(), Set.of());
    }
}
