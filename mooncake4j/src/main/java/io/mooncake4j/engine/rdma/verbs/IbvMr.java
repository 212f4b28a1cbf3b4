package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;

/** A registered memory region ({@code struct ibv_mr}): its keys and range. */
public final class IbvMr implements AutoCloseable {

    private final IbvPd pd;
    private final MemorySegment mr;
    private final long address;
    private final long length;
    private final int lkey;
    private final int rkey;
    private boolean closed;

    IbvMr(IbvPd pd, MemorySegment mr) {
        this.pd = pd;
        this.mr = mr;
        this.address = mr.get(ADDRESS, VerbsLayouts.MR_ADDR).address();
        this.length = mr.get(JAVA_LONG, VerbsLayouts.MR_LENGTH);
        this.lkey = mr.get(JAVA_INT, VerbsLayouts.MR_LKEY);
        this.rkey = mr.get(JAVA_INT, VerbsLayouts.MR_RKEY);
    }

    public long address() {
        return address;
    }

    public long length() {
        return length;
    }

    /** Local key (unsigned 32-bit in an int). */
    public int lkey() {
        return lkey;
    }

    /** Remote key (unsigned 32-bit in an int). */
    public int rkey() {
        return rkey;
    }

    /** {@code ibv_dereg_mr}. Idempotent. The caller ensures no posted WR still uses the region. */
    @Override
    public void close() {
        synchronized (pd.context()) {
            if (closed) {
                return;
            }
            closed = true;
            pd.forget(this);
            try {
                IbvContext.check("ibv_dereg_mr", (int) Verbs.DEREG_MR.invokeExact(mr));
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw IbvContext.downcall("ibv_dereg_mr", t);
            }
        }
    }
}
