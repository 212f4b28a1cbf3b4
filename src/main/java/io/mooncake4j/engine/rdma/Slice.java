package io.mooncake4j.engine.rdma;

import java.util.Arrays;

/**
 * One slice of a task: at most {@code MC_SLICE_SIZE} (+ fragment) bytes moved by one RDMA
 * WRITE or READ. Slices are pooled ({@link Pool}) and reused, so steady-state transfers allocate
 * nothing per work request; a slice's {@link #id} is the work request's {@code wr_id}.
 *
 * <p>Thread-safety: a slice is owned by one thread at a time (dispatcher, then the endpoint
 * under its lock, then the poller after the completion); hand-over goes through the endpoint
 * lock or the completion queue, which order the field accesses.
 */
final class Slice {

    final int id;
    RdmaBatch batch;
    int task;
    int opcode;
    long local;
    long remote;
    int length;
    int lkey;
    int rkey;
    /** Attempts made so far (0 before the first post). */
    int attempt;
    /** Spreads slices over NICs; the path of attempt k is derived from it (§5.2). */
    int seed;
    /** Index of the peer buffer in the target's descriptor. */
    int peerBuffer;
    /** The peer this slice goes to. */
    PeerSegment peer;
    RdmaEndpoint endpoint;
    int qp;

    private Slice(int id) {
        this.id = id;
    }

    /** The pool of slices; ids are dense, so a completion finds its slice by array index. */
    static final class Pool {
        private volatile Slice[] byId = new Slice[0];
        private Slice[] free = new Slice[64];
        private int freeTop;
        private int live;

        /** A slice whose fields the caller fills. */
        synchronized Slice acquire() {
            live++;
            if (freeTop > 0) {
                return free[--freeTop];
            }
            Slice[] cur = byId;
            Slice s = new Slice(cur.length);
            Slice[] next = Arrays.copyOf(cur, Math.max(64, cur.length * 2));
            for (int i = cur.length; i < next.length; i++) {
                next[i] = i == s.id ? s : new Slice(i);
                if (i != s.id) {
                    pushFree(next[i]);
                }
            }
            byId = next;
            return s;
        }

        private void pushFree(Slice s) {
            if (freeTop == free.length) {
                free = Arrays.copyOf(free, free.length * 2);
            }
            free[freeTop++] = s;
        }

        /** The slice with id {@code wrId}, or null for an unknown id. */
        Slice get(long wrId) {
            Slice[] cur = byId;
            return wrId >= 0 && wrId < cur.length ? cur[(int) wrId] : null;
        }

        /** Returns a slice to the pool and drops its references. */
        synchronized void release(Slice s) {
            s.batch = null;
            s.peer = null;
            s.endpoint = null;
            live--;
            pushFree(s);
        }

        /** Slices acquired and not yet released. */
        synchronized int live() {
            return live;
        }
    }
}
