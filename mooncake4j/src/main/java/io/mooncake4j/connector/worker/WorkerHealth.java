package io.mooncake4j.connector.worker;

import java.util.List;

/**
 * Whether the worker's background threads are all alive and serving, a snapshot ("no silent
 * death"). Immutable; read it with {@link MooncakeConnectorWorker#health()}.
 *
 * @param healthy        false once a watched thread died and could not be recovered: the worker is deaf on some
 *                       port and should be restarted by the embedder
 * @param problems       one line per unrecovered death (component and cause); empty when healthy
 * @param loopDeaths     watched threads that died (listener, sender, receiver, pull I/O), recovered or not;
 *                       each was logged once at ERROR
 * @param loopRecoveries deaths after which the component was rebuilt (socket and loop recreated) and serves again
 */
public record WorkerHealth(boolean healthy, List<String> problems, long loopDeaths, long loopRecoveries) {

    /** Keeps unmodifiable copies of the collections. */
    public WorkerHealth {
        problems = List.copyOf(problems);
    }
}
