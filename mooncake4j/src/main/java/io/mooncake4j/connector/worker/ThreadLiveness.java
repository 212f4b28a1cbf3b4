package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.connector.worker.send.SenderListener;
import java.util.ArrayList;
import java.util.List;

/**
 * The worker's health beyond what its {@code HealthMonitor} heard of: a loop thread that is not
 * running or an executor that was shut down while the worker is open (P's listener and sender loop,
 * D's pull I/O thread and receiver loop). Cheap, any thread.
 */
final class ThreadLiveness {

    private ThreadLiveness() {}

    /** {@code h}, unhealthy with the reasons when a loop of {@code l} or {@code r} (either may be null) is down. */
    static WorkerHealth check(WorkerHealth h, SenderListener l, KvReceiver r) {
        List<String> extra = new ArrayList<>();
        if (l != null && !l.alive()) {
            extra.add("mooncake-p-listener-0 is not running");
        }
        if (l != null && l.senderLoop().isShutdown()) {
            extra.add("mooncake-p-sender-0 is shut down");
        }
        if (r != null && !r.channels().alive()) {
            extra.add("mooncake-d-io-0 is not running");
        }
        if (r != null && r.loop().isShutdown()) {
            extra.add("mooncake-d-receiver-0 is shut down");
        }
        if (extra.isEmpty()) {
            return h;
        }
        List<String> all = new ArrayList<>(h.problems());
        for (String e : extra) {
            if (!all.contains(e)) {
                all.add(e);
            }
        }
        return new WorkerHealth(false, all, h.loopDeaths(), h.loopRecoveries());
    }
}
