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
    /** Whether an attempt failed because its endpoint could not be brought up (QP handshake). */
    boolean unreachable;
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

    /**
     * The pool of slices; ids are dense, so a completion finds its slice by array index.
     *
     * <p>Platform threads (the pollers, which release nearly every slice, and long-lived
     * submitters) keep a small thread-local cache, as C++ Mooncake's {@code tl_slice_cache}: they
     * acquire and release without a shared lock, and trade slices with the shared stack under its
     * monitor only in batches of {@link #BATCH}, so the monitor is taken once per
     * {@code BATCH} slices instead of twice per slice. Virtual threads, which may be many and
     * short-lived (a cache would strand slices when they end), use the shared stack directly.
     * The live count is a {@link java.util.concurrent.atomic.LongAdder}.
     */
    static final class Pool {
        /** Slices moved between a thread cache and the shared stack at a time. */
        static final int BATCH = 32;

        private volatile Slice[] byId = new Slice[0];
        private Slice[] free = new Slice[64];
        private int freeTop;
        private final java.util.concurrent.atomic.LongAdder live = new java.util.concurrent.atomic.LongAdder();
        private final ThreadLocal<Cache> caches = ThreadLocal.withInitial(Cache::new);

        /** A thread's slices: at most {@code 4 × BATCH}. */
        private static final class Cache {
            final Slice[] slices = new Slice[4 * BATCH];
            int top;
        }

        /** A slice whose fields the caller fills. */
        Slice acquire() {
            live.increment();
            if (Thread.currentThread().isVirtual()) {
                synchronized (this) {
                    return takeShared();
                }
            }
            Cache c = caches.get();
            if (c.top == 0) {
                synchronized (this) {
                    while (c.top < BATCH && freeTop > 0) {
                        c.slices[c.top++] = free[--freeTop];
                    }
                    if (c.top == 0) {
                        return takeShared();
                    }
                }
            }
            return c.slices[--c.top];
        }

        /** Under the monitor: a free slice, growing the pool when there is none. */
        private Slice takeShared() {
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
        void release(Slice s) {
            s.batch = null;
            s.unreachable = false;
            s.peer = null;
            s.endpoint = null;
            live.decrement();
            if (Thread.currentThread().isVirtual()) {
                synchronized (this) {
                    pushFree(s);
                }
                return;
            }
            Cache c = caches.get();
            if (c.top == c.slices.length) {
                synchronized (this) {
                    for (int i = 0; i < 2 * BATCH; i++) {
                        pushFree(c.slices[--c.top]);
                        c.slices[c.top] = null;
                    }
                }
            }
            c.slices[c.top++] = s;
        }

        /** Slices acquired and not yet released. */
        int live() {
            return live.intValue();
        }
    }
}
