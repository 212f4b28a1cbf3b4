package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;

/**
 * A completion queue ({@code struct ibv_cq}), polled through {@code ibv_context.ops.poll_cq}.
 * One owner thread polls it.
 */
public final class IbvCq implements AutoCloseable {

    private final IbvContext context;
    private final MemorySegment cq;
    private final MemorySegment pollFn;
    private boolean closed;

    IbvCq(IbvContext context, MemorySegment cq) {
        this.context = context;
        this.cq = cq;
        this.pollFn = context.opsPollCq;
    }

    MemorySegment segment() {
        return cq;
    }

    /** Entries the provider actually allocated ({@code cq->cqe}, at least what was asked). */
    public int capacity() {
        return cq.get(JAVA_INT, VerbsLayouts.CQ_CQE);
    }

    /**
     * {@code ibv_poll_cq} into {@code wc} (up to its capacity): the number of completions, or a
     * negative value when polling failed. Data path: no allocation.
     */
    public int poll(WorkCompletions wc) {
        try {
            return (int) Verbs.POLL_CQ.invokeExact(pollFn, cq, wc.capacity(), wc.segment());
        } catch (Throwable t) {
            throw IbvContext.downcall("ibv_poll_cq", t);
        }
    }

    /** {@code ibv_destroy_cq}. Idempotent. Destroy the QPs using it first. */
    @Override
    public void close() {
        synchronized (context) {
            if (closed) {
                return;
            }
            closed = true;
            context.forget(this);
            try {
                IbvContext.check("ibv_destroy_cq", (int) Verbs.DESTROY_CQ.invokeExact(cq));
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw IbvContext.downcall("ibv_destroy_cq", t);
            }
        }
    }
}
