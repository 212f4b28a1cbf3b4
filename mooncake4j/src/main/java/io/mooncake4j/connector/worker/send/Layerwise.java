package io.mooncake4j.connector.worker.send;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** Layer-wise state of one transfer ({@link SendBlockMeta#layerwise}); sender loop only. */
final class Layerwise {
    final List<Segment> segments = new ArrayList<>();
    /** Saved (chunk, layers) pairs in save order; every target writes them in this order. */
    final List<Event> events = new ArrayList<>();
    final List<Target> targets = new ArrayList<>();
    /** The last chunk has every layer saved: nothing more will be written for this transfer. */
    boolean allSaved;

    /** One prefill chunk of a transfer: prompt blocks {@code [first, first + local[g].length)} of {@code total}. */
    static final class Segment {
        final SendBlockMeta sm;
        final int[][] local;
        final int first;
        final int total;
        final boolean last;
        final Set<String> saved = new HashSet<>();
        boolean complete;

        Segment(SendBlockMeta sm, int[][] local, int first, int total, boolean last) {
            this.sm = sm;
            this.local = local;
            this.first = first;
            this.total = total;
            this.last = last;
        }
    }

    record Event(Segment segment, List<String> layers) {}

    /** One D request of one pull that is pushed layer by layer. */
    static final class Target {
        final Pull pull;
        final String dReqId;
        final SendBlockMeta sm;
        final int[][] remote;
        /** Events of {@link Layerwise#events} submitted so far. */
        int cursor;
        int inflight;
        /** The first failure, reported to D once; nothing more is written for this request. */
        String failed;
        boolean landed;

        Target(Pull pull, String dReqId, SendBlockMeta sm, int[][] remote) {
            this.pull = pull;
            this.dReqId = dReqId;
            this.sm = sm;
            this.remote = remote;
        }
    }
}
