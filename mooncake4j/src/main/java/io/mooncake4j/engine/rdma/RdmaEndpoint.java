package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.RdmaProvider.QueuePair;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One endpoint: {@code MC_NUM_QP_PER_EP} RC QPs from a local context to one peer NIC path
 * (Mooncake {@code RdmaEndPoint}). Slices queue here until the endpoint is connected; the
 * poster (a submitting thread or the context's poller) then spreads them over the QPs, one
 * chained {@code ibv_post_send} per QP, bounded by {@code MC_MAX_WR} outstanding per QP and the
 * CQ size per context. Work requests live in one reusable {@link SendWorkRequests} array.
 *
 * <p>States: CONNECTING (QPs created, handshake running or awaited), WAIT_ACK (passive side,
 * QPs at RTS, waiting for the requester's ready-ACK), CONNECTED, BROKEN (QPs moved to ERR; the
 * endpoint is out of its context's map, its queued slices go elsewhere, and its QPs are destroyed
 * once their outstanding work has completed or flushed). A broken endpoint is never reused:
 * the next transfer builds a fresh one with new QP numbers.
 *
 * <p>Thread-safety: state, queue, QP transitions and posting are guarded by {@link #lock};
 * outstanding counts are atomic (incremented by the poster, decremented by the poller).
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code mooncake-transfer-engine/src/transport/rdma_transport/rdma_endpoint.cpp} ({@code RdmaEndPoint})
 */
final class RdmaEndpoint {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaEndpoint.class);

    static final int CONNECTING = 0, WAIT_ACK = 1, CONNECTED = 2, BROKEN = 3;
    /** ENOMEM: send queue full; retried once completions free room. */
    private static final int ENOMEM = 12;
    private static final int EINVAL = 22;

    final RdmaContext ctx;
    final String peerNicPath;
    final ReentrantLock lock = new ReentrantLock();
    private final QueuePair[] qps;
    private final AtomicIntegerArray outstanding;
    private final SendWorkRequests wrs;
    private final int perQpPost;
    private final int maxWr;
    private final ArrayDeque<Slice> queue = new ArrayDeque<>();
    private final Slice[] posting;
    private volatile int state = CONNECTING;
    private List<Long> peerQpNums;
    private boolean destroyed;
    /** Set when a bring-up failed at INIT → RTR with EINVAL (a GID/MTU problem, spec §5.1). */
    private volatile boolean rtrEinval;
    private int nextQp;
    /** Calls of {@link #pump} (guarded by the lock; tests). */
    private int pumps;
    /** Whether this endpoint is in its context's queue of endpoints waiting for room (see {@link RdmaContext#awaitRoom}). */
    final java.util.concurrent.atomic.AtomicBoolean awaitingRoom = new java.util.concurrent.atomic.AtomicBoolean();

    /** Creates the QPs (RESET); throws {@link VerbsException} when the device refuses. */
    RdmaEndpoint(RdmaContext ctx, String peerNicPath, RdmaSettings s) {
        this.ctx = ctx;
        this.peerNicPath = peerNicPath;
        this.maxWr = s.maxWr();
        this.perQpPost = Math.min(s.maxWr(), 64);
        this.qps = new QueuePair[s.numQpPerEp()];
        this.outstanding = new AtomicIntegerArray(qps.length);
        try {
            for (int i = 0; i < qps.length; i++) {
                qps[i] = ctx.device.createRcQp(ctx.cq, s.qpCapabilities());
            }
        } catch (RuntimeException e) {
            for (QueuePair q : qps) {
                if (q != null) {
                    q.close();
                }
            }
            throw e;
        }
        this.wrs = new SendWorkRequests(perQpPost * qps.length);
        this.posting = new Slice[perQpPost * qps.length];
    }

    int state() {
        return state;
    }

    /** Own QP numbers, for the Connection message. */
    List<Long> qpNums() {
        List<Long> out = new ArrayList<>(qps.length);
        for (QueuePair q : qps) {
            out.add(Integer.toUnsignedLong(q.qpNum()));
        }
        return out;
    }

    int qpCount() {
        return qps.length;
    }

    /** The peer QPs these QPs are connected to, or null before the bring-up. */
    List<Long> peerQpNums() {
        lock.lock();
        try {
            return peerQpNums;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Brings every QP to RTS against the peer's QPs (QP i to peer QP i). If they are already up,
     * succeeds only when {@code peerQps} is the same list (simultaneous open, repeated request).
     *
     * @return false when already connected to other QPs
     */
    boolean bringUp(io.mooncake4j.engine.rdma.verbs.Gid peerGid, int peerLid, List<Long> peerQps, RdmaSettings s) {
        lock.lock();
        try {
            if (state == BROKEN) {
                throw new IllegalStateException("endpoint to " + peerNicPath + " is already torn down");
            }
            if (peerQpNums != null) {
                return peerQpNums.equals(peerQps);
            }
            if (peerQps.size() != qps.length) {
                throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "QP count mismatch in peer and local endpoints (%d vs %d); MC_NUM_QP_PER_EP must match",
                        peerQps.size(), qps.length));
            }
            int gidIndex = ctx.gidIndex;
            for (int i = 0; i < qps.length; i++) {
                try {
                    QpBringUp.connect(qps[i], new QpBringUp.Peer(peerGid, peerLid, (int) (long) peerQps.get(i)),
                            ctx.activeMtu, gidIndex, s);
                } catch (VerbsException e) {
                    rtrEinval = e.errno() == EINVAL && qps[i].state() == IbvQp.STATE_INIT;
                    throw e;
                }
            }
            peerQpNums = List.copyOf(peerQps);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Whether the last bring-up failed at RTR with EINVAL. */
    boolean rtrFailedWithEinval() {
        return rtrEinval;
    }

    /** Marks the endpoint usable (unless it broke meanwhile). */
    void markState(int to) {
        lock.lock();
        try {
            if (state != BROKEN) {
                state = to;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Queues a slice; the caller pumps afterwards. False when the endpoint is broken (dispatch elsewhere). */
    boolean enqueue(Slice s) {
        lock.lock();
        try {
            if (state == BROKEN) {
                return false;
            }
            s.endpoint = this;
            queue.addLast(s);
            return true;
        } finally {
            lock.unlock();
        }
    }

    boolean hasQueued() {
        lock.lock();
        try {
            return !queue.isEmpty();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Posts queued slices while there is room. Slices of aborted batches are handed to
     * {@code engine.abandon} instead. On a post failure other than a full queue the endpoint
     * breaks and {@code true} is returned: the caller must then call {@link #breakDown}.
     */
    boolean pump(RdmaTransport engine) {
        lock.lock();
        try {
            pumps++;
            if (state != CONNECTED || destroyed) {
                return false;
            }
            rounds:
            while (!queue.isEmpty()) {
                int posted = 0;
                int n = 0;
                for (int k = 0; k < qps.length && !queue.isEmpty(); k++) {
                    int q = (nextQp + k) % qps.length;
                    int room = Math.min(Math.min(perQpPost, maxWr - outstanding.get(q)), queue.size());
                    room = room > 0 ? ctx.cqReserve(room) : 0; // reserved in one step: no overrun between posters
                    int first = n;
                    while (room > 0 && !queue.isEmpty()) {
                        Slice s = queue.pollFirst();
                        RdmaBatch b = s.batch;
                        b.inFlight.incrementAndGet(); // before the abort check: an aborter waits for it
                        if (b.aborted()) {
                            b.inFlight.decrementAndGet();
                            engine.abandon(s);
                            continue;
                        }
                        s.qp = q;
                        wrs.set(n, s.id, s.opcode, SendWorkRequests.SEND_SIGNALED, s.local, s.length, s.lkey,
                                s.remote, s.rkey);
                        posting[n++] = s;
                        room--;
                        outstanding.incrementAndGet(q);
                    }
                    if (room > 0) {
                        ctx.cqRelease(room); // reserved for slices that turned out to be aborted
                    }
                    int count = n - first;
                    if (count == 0) {
                        continue;
                    }
                    wrs.chain(first, count);
                    int before = outstanding.get(q); // posting is under the lock: only completions lower it meanwhile
                    int rc = qps[q].postSend(wrs, first);
                    if (rc != 0) {
                        int bad = wrs.badIndex();
                        int firstBad = bad < first || bad >= n ? first : bad;
                        for (int i = n - 1; i >= firstBad; i--) { // not posted: back to the queue, in order
                            Slice s = posting[i];
                            posting[i] = null;
                            s.batch.inFlight.decrementAndGet();
                            ctx.cqRelease(1);
                            outstanding.decrementAndGet(q);
                            queue.addFirst(s);
                        }
                        posted += firstBad - first;
                        clearPosting(first, firstBad);
                        if (rc == ENOMEM) {
                            nextQp = (q + 1) % qps.length;
                            ctx.awaitRoom(this); // room comes back with completions
                            if (outstanding.get(q) < before - (n - firstBad)) {
                                continue rounds; // one completed since the post: the poller may have looked already
                            }
                            if (posted > 0) {
                                ctx.wakePoller();
                            }
                            return false;
                        }
                        LOG.warn("ibv_post_send to {} on {} failed: {}; rebuilding the endpoint", peerNicPath,
                                ctx.name, VerbsException.errnoName(rc));
                        return true;
                    }
                    clearPosting(first, n);
                    posted += count;
                }
                nextQp = (nextQp + 1) % qps.length;
                if (posted == 0) {
                    // no room anywhere: the poller pumps this endpoint after completions. Registered first, then
                    // checked again: completions that freed room between the check above and the registration
                    // were handled by a poller that did not see this endpoint yet, and none may follow
                    ctx.awaitRoom(this);
                    if (roomNow()) {
                        continue;
                    }
                    return false;
                }
                ctx.wakePoller();
            }
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** Whether some QP and the CQ have room now (the re-check after registering to wait for room). */
    private boolean roomNow() {
        if (!ctx.cqHasRoom()) {
            return false;
        }
        for (int q = 0; q < qps.length; q++) {
            if (outstanding.get(q) < maxWr) {
                return true;
            }
        }
        return false;
    }

    /** How often {@link #pump} ran (tests: the poller must not pump idle endpoints). */
    int pumpCount() {
        lock.lock();
        try {
            return pumps;
        } finally {
            lock.unlock();
        }
    }

    private void clearPosting(int from, int to) {
        for (int i = from; i < to; i++) {
            posting[i] = null;
        }
    }

    /** Called by the poller for each completion of a slice posted here. */
    void completed(int qp) {
        outstanding.decrementAndGet(qp);
        ctx.cqRelease(1);
    }

    int outstandingTotal() {
        int t = 0;
        for (int i = 0; i < qps.length; i++) {
            t += outstanding.get(i);
        }
        return t;
    }

    /**
     * Breaks the endpoint: out of the context's map, QPs to ERR (their outstanding work completes
     * with {@code WR_FLUSH_ERR}), queued slices returned for dispatch elsewhere. Idempotent; the
     * second call returns an empty list.
     */
    List<Slice> breakDown() {
        List<Slice> out;
        lock.lock();
        try {
            if (state == BROKEN) {
                return List.of();
            }
            state = BROKEN;
            ctx.forget(this);
            for (QueuePair q : qps) {
                try {
                    if (q.state() != IbvQp.STATE_RESET && q.state() != IbvQp.STATE_ERR) {
                        q.modifyToError();
                    }
                } catch (RuntimeException e) {
                    LOG.warn("moving QP {} of {} to ERR failed: {}", q.qpNum(), ctx.name, e.getMessage());
                }
            }
            out = new ArrayList<>(queue);
            queue.clear();
        } finally {
            lock.unlock();
        }
        destroyIfIdle();
        return out;
    }

    /** Destroys the QPs and the work-request array of a broken endpoint once nothing is outstanding. */
    void destroyIfIdle() {
        lock.lock();
        try {
            if (state != BROKEN || destroyed || outstandingTotal() != 0) {
                return;
            }
            destroyNow();
        } finally {
            lock.unlock();
        }
    }

    /** Destroys QPs and the work-request array regardless of outstanding work (teardown). */
    void destroyNow() {
        lock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
            state = BROKEN;
            for (QueuePair q : qps) {
                try {
                    q.close();
                } catch (RuntimeException e) {
                    LOG.warn("destroying QP {} of {} failed: {}", q.qpNum(), ctx.name, e.getMessage());
                }
            }
            wrs.close();
        } finally {
            lock.unlock();
        }
    }

    /** Queued slices, removed (teardown). */
    List<Slice> drainQueue() {
        lock.lock();
        try {
            List<Slice> out = new ArrayList<>(queue);
            queue.clear();
            return out;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return ctx.name + "->" + peerNicPath;
    }
}
