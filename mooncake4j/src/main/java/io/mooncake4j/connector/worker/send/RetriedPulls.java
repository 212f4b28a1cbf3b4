package io.mooncake4j.connector.worker.send;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * What P knows about each D request it serves or served lately, so that a pull D sends again (its
 * connection was lost before the answer came, and a D without a ZMQ identity reconnects as a new peer)
 * is answered without writing D's blocks a second time. A request is keyed by D's engine
 * ({@code remote_hostname:remote_port}), D's request id and the transfer id: one D worker pulls one
 * request once, so a second pull under the same key is a re-send.
 *
 * <p>Three answers: the request is still being served by the first pull, and the re-sent pull follows
 * it (it hears that pull's outcome: one write at most); it was answered lately, and the outcome is
 * answered again; its transfer finished lately but this D request's outcome is forgotten, and it gets a
 * clear error instead of waiting for a transfer that will never be ready again.
 *
 * <p>Bounded: outcomes are kept for the abort timeout (D's receive deadline runs that long plus a
 * margin after P's last answer, so a re-send comes within it), finished transfer ids (a few bytes each)
 * {@link #FINISHED_TTL_FACTOR} times as long, and at most {@code cap} of each, the oldest dropped
 * first. Sender loop only.
 */
final class RetriedPulls {

    /** One request's final outcome at P: written ({@code ok}) or failed with {@code errMsg}. */
    record Outcome(boolean ok, String errMsg, long atNanos) {
    }

    static final String FORGOTTEN_MESSAGE = "P finished transfer %s already and no longer knows the outcome of D "
            + "request %s (pulled again after its answer was lost); it is not written again";

    /** Finished transfer ids outlive outcomes by this factor, so that a late re-send hears why. */
    static final int FINISHED_TTL_FACTOR = 4;

    private final long ttlNanos;
    private final int cap;
    /** Key → the pull serving that request now (until its outcome is settled). */
    private final Map<String, Pull> serving = new HashMap<>();
    /** Key → re-sent pulls waiting for the serving pull's outcome of that request. */
    private final Map<String, List<Pull>> followers = new HashMap<>();
    private final LinkedHashMap<String, Outcome> answered = new LinkedHashMap<>();
    private final LinkedHashMap<String, Long> finishedTransfers = new LinkedHashMap<>();

    final LongAdder followedCount = new LongAdder();
    final LongAdder answeredAgainCount = new LongAdder();
    final LongAdder forgottenCount = new LongAdder();

    RetriedPulls(long ttlNanos, int cap) {
        this.ttlNanos = ttlNanos;
        this.cap = Math.max(1, cap);
    }

    static String key(String peer, String dReqId, String transferId) {
        return peer + '\u0000' + dReqId + '\u0000' + transferId;
    }

    /** The pull now serving {@code key}, or null. */
    Pull servedBy(String key) {
        return serving.get(key);
    }

    void serve(String key, Pull pull) {
        serving.put(key, pull);
    }

    void follow(String key, Pull pull) {
        followers.computeIfAbsent(key, k -> new ArrayList<>(1)).add(pull);
        followedCount.increment();
    }

    /** The outcome answered lately under {@code key}, or null. */
    Outcome answered(String key, long now) {
        expire(now);
        Outcome o = answered.get(key);
        if (o != null) {
            answeredAgainCount.increment();
        }
        return o;
    }

    /** Whether {@code transferId} finished (every pull of it written) lately. */
    boolean finishedLately(String transferId, long now) {
        expire(now);
        return finishedTransfers.containsKey(transferId);
    }

    void forgotten() {
        forgottenCount.increment();
    }

    /**
     * {@code pull}'s request under {@code key} has its final outcome ({@code remember} false: the pull was
     * abandoned without an answer, so nothing is kept and a later re-send is served afresh). Returns the
     * pulls that followed it (each still to be answered), empty when none; null when {@code pull} was not
     * the one serving {@code key} (settled already).
     */
    List<Pull> settle(String key, Pull pull, boolean ok, String errMsg, boolean remember,
            long now) {
        if (!serving.remove(key, pull)) {
            return null;
        }
        if (remember) {
            expire(now);
            answered.remove(key);
            answered.put(key, new Outcome(ok, errMsg, now));
            trim(answered);
        }
        List<Pull> f = followers.remove(key);
        return f == null ? List.of() : f;
    }

    void transferFinished(String transferId, long now) {
        finishedTransfers.remove(transferId);
        finishedTransfers.put(transferId, now);
        trim(finishedTransfers);
    }

    private void trim(LinkedHashMap<String, ?> m) {
        Iterator<String> it = m.keySet().iterator();
        while (m.size() > cap && it.hasNext()) {
            it.next();
            it.remove();
        }
    }

    private void expire(long now) {
        for (Iterator<Outcome> it = answered.values().iterator(); it.hasNext(); ) {
            if (now - it.next().atNanos() - ttlNanos <= 0) {
                break; // insertion order is time order
            }
            it.remove();
        }
        for (Iterator<Long> it = finishedTransfers.values().iterator(); it.hasNext(); ) {
            if (now - it.next() - FINISHED_TTL_FACTOR * ttlNanos <= 0) {
                break;
            }
            it.remove();
        }
    }

    /** Entries held (tests: they stay bounded). */
    int size() {
        return serving.size() + followers.size() + answered.size() + finishedTransfers.size();
    }
}
