package io.mooncake4j.serve;

import io.mooncake4j.sim.SimWorker;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The counters a {@code serve} node reports in {@code /mooncake/status} beyond the engine's own. */
final class NodeCounters {

    private NodeCounters() {
    }

    /** The workers' side-channel counters summed, as {@code /mooncake/status} reports them. */
    static Map<String, Object> sideChannel(List<SimWorker> workers) {
        long selfAimed = 0;
        long limit = 0;
        long errors = 0;
        long peers = 0;
        long[] answers = new long[4];
        long[] boot = new long[3];
        for (SimWorker w : workers) {
            if (w instanceof io.mooncake4j.sim.ConnectorSimWorker c) {
                io.mooncake4j.connector.worker.WorkerCounters k = c.worker().counters();
                selfAimed += k.selfAimedRefusals();
                limit += k.limitRejections();
                errors += k.errorReplies();
                peers += k.peersDropped();
                answers[0] += k.answersDropped().protocol();
                answers[1] += k.answersDropped().peerGone();
                answers[2] += k.answersDropped().queueFull();
                answers[3] += k.answersDropped().closing();
                boot[0] += k.bootstrapClosed().evicted();
                boot[1] += k.bootstrapClosed().refused();
                boot[2] += k.bootstrapClosed().expired();
            }
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("self_aimed_refusals", selfAimed);
        m.put("limit_rejections", limit);
        m.put("error_replies", errors);
        m.put("peers_dropped", peers);
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("protocol", answers[0]);
        a.put("peer_gone", answers[1]);
        a.put("queue_full", answers[2]);
        a.put("closing", answers[3]);
        m.put("answers_dropped", a);
        Map<String, Object> b = new LinkedHashMap<>();
        b.put("evicted", boot[0]);
        b.put("refused", boot[1]);
        b.put("expired", boot[2]);
        m.put("bootstrap_connections_closed", b);
        return m;
    }
}
