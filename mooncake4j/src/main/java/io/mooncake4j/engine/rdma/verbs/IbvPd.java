package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A protection domain ({@code struct ibv_pd}). Owns its memory regions; closing it deregisters
 * them first. QPs created here are owned by the {@link IbvContext} (closed before any MR).
 */
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
public final class IbvPd implements AutoCloseable {

    /** {@code IBV_ACCESS_LOCAL_WRITE}. */
    public static final int ACCESS_LOCAL_WRITE = 1;
    /** {@code IBV_ACCESS_REMOTE_WRITE}. */
    public static final int ACCESS_REMOTE_WRITE = 1 << 1;
    /** {@code IBV_ACCESS_REMOTE_READ}. */
    public static final int ACCESS_REMOTE_READ = 1 << 2;
    /** {@code IBV_ACCESS_REMOTE_ATOMIC}. */
    public static final int ACCESS_REMOTE_ATOMIC = 1 << 3;
    /** {@code IBV_ACCESS_RELAXED_ORDERING} ({@code IBV_ACCESS_OPTIONAL_FIRST}): honoured only through {@code ibv_reg_mr_iova2}. */
    public static final int ACCESS_RELAXED_ORDERING = 1 << 20;

    private final IbvContext context;
    private final MemorySegment pd;
    private final List<IbvMr> mrs = new ArrayList<>();
    private boolean closed;

    IbvPd(IbvContext context, MemorySegment pd) {
        this.context = context;
        this.pd = pd;
    }

    MemorySegment segment() {
        return pd;
    }

    public IbvContext context() {
        return context;
    }

    /**
     * Registers {@code [address, address + length)}. With {@code ibv_reg_mr_iova2} available it
     * is used with {@code iova = address} (what the {@code ibv_reg_mr} macro in {@code verbs.h}
     * does for optional flags); otherwise the exported {@code ibv_reg_mr} is called and
     * {@link #ACCESS_RELAXED_ORDERING} is dropped.
     */
    public IbvMr registerMemory(long address, long length, int access) {
        beginRegistration();
        MemorySegment mr = MemorySegment.NULL;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment addr = MemorySegment.ofAddress(address);
            String op;
            if (Verbs.HAS_REG_MR_IOVA2) {
                op = "ibv_reg_mr_iova2";
                mr = (MemorySegment) Verbs.REG_MR_IOVA2.invokeExact(capture, pd, addr, length, address, access);
            } else {
                op = "ibv_reg_mr";
                mr = (MemorySegment) Verbs.REG_MR.invokeExact(capture, pd, addr, length, access & ~ACCESS_RELAXED_ORDERING);
            }
            if (mr.equals(MemorySegment.NULL)) {
                int errno = Verbs.errno(capture);
                throw new VerbsException(op, errno, regHint(errno, address, length, access));
            }
            return adopt(mr);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw IbvContext.downcall("ibv_reg_mr", t);
        } finally {
            endRegistration();
        }
    }

    /** {@code ibv_reg_dmabuf_mr}: GPU memory exported as a dma-buf file descriptor. */
    public IbvMr registerDmabuf(long offset, long length, long iova, int fd, int access) {
        if (!Verbs.HAS_REG_DMABUF_MR) {
            throw new VerbsException("ibv_reg_dmabuf_mr", Verbs.EOPNOTSUPP,
                    "not provided by this " + Verbs.LIBRARY + " (rdma-core >= 34 needed)");
        }
        beginRegistration();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment mr = (MemorySegment) Verbs.REG_DMABUF_MR.invokeExact(capture, pd, offset, length, iova, fd, access);
            if (mr.equals(MemorySegment.NULL)) {
                int errno = Verbs.errno(capture);
                throw new VerbsException("ibv_reg_dmabuf_mr", errno, regHint(errno, iova, length, access));
            }
            return adopt(mr);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw IbvContext.downcall("ibv_reg_dmabuf_mr", t);
        } finally {
            endRegistration();
        }
    }

    /*
     * Registration pins pages (seconds for hundreds of GiB), so it does not hold the context
     * monitor that QP creation and modification take: libibverbs verbs on different objects are
     * thread-safe; the monitor only guards the Java lists and the closed flags. Instead the
     * context counts registrations in flight, and close (context or PD) waits for them.
     */
    private void beginRegistration() {
        synchronized (context) {
            ensureOpen();
            context.enterCall();
        }
    }

    private void endRegistration() {
        context.exitCall();
    }

    private IbvMr adopt(MemorySegment mr) {
        synchronized (context) { // a closing PD waits for registrations in flight, so it is still open here
            IbvMr m = new IbvMr(this, mr.reinterpret(VerbsLayouts.IBV_MR.byteSize()));
            mrs.add(m);
            return m;
        }
    }

    static String regHint(int errno, long address, long length, int access) {
        String what = String.format(Locale.ROOT, "addr 0x%x length %d access 0x%x", address, length, access);
        return switch (errno) {
            case Verbs.ENOMEM, Verbs.EAGAIN -> what + ": cannot pin the memory; raise the locked-memory limit"
                    + " (ulimit -l unlimited, or 'memlock unlimited' in /etc/security/limits.conf, or"
                    + " LimitMEMLOCK=infinity for a systemd service)";
            case Verbs.EFAULT -> what + ": the range is not mapped in this process";
            case Verbs.EINVAL -> what + ": invalid range or access flags for this device";
            default -> what;
        };
    }

    /**
     * Creates an RC QP on this PD with {@code sendCq}/{@code recvCq}; owned by the context.
     * {@code sqSigAll = false} as in Mooncake (every WR is posted signalled instead).
     */
    public IbvQp createRcQp(IbvCq sendCq, IbvCq recvCq, QpCapabilities caps) {
        synchronized (context) {
            ensureOpen();
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment a = arena.allocate(VerbsLayouts.IBV_QP_INIT_ATTR);
                a.set(ADDRESS, VerbsLayouts.QP_INIT_SEND_CQ, sendCq.segment());
                a.set(ADDRESS, VerbsLayouts.QP_INIT_RECV_CQ, recvCq.segment());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_CAP_MAX_SEND_WR, caps.maxSendWr());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_CAP_MAX_RECV_WR, caps.maxRecvWr());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_CAP_MAX_SEND_SGE, caps.maxSendSge());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_CAP_MAX_RECV_SGE, caps.maxRecvSge());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_CAP_MAX_INLINE_DATA, caps.maxInlineData());
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_QP_TYPE, IbvQp.TYPE_RC);
                a.set(JAVA_INT, VerbsLayouts.QP_INIT_SQ_SIG_ALL, 0);
                MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
                MemorySegment qp = (MemorySegment) Verbs.CREATE_QP.invokeExact(capture, pd, a);
                if (qp.equals(MemorySegment.NULL)) {
                    throw new VerbsException("ibv_create_qp", Verbs.errno(capture), String.format(Locale.ROOT,
                            "device %s %s (device limits: max_qp_wr, max_sge)", context.name(), caps));
                }
                IbvQp q = new IbvQp(context, qp.reinterpret(VerbsLayouts.IBV_QP.byteSize()));
                context.adopt(q);
                return q;
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw IbvContext.downcall("ibv_create_qp", t);
            }
        }
    }

    void forget(IbvMr mr) {
        mrs.remove(mr);
    }

    private void ensureOpen() {
        context.ensureOpen();
        if (closed) {
            throw new IllegalStateException("protection domain is closed");
        }
    }

    /** Deregisters this PD's MRs, then {@code ibv_dealloc_pd}. Idempotent. */
    @Override
    public void close() {
        synchronized (context) {
            if (closed) {
                return;
            }
            context.awaitNoCalls();
            VerbsException first = null;
            for (IbvMr mr : List.copyOf(mrs)) {
                try {
                    mr.close();
                } catch (VerbsException e) {
                    first = first != null ? first : e;
                }
            }
            closed = true;
            context.forget(this);
            try {
                IbvContext.check("ibv_dealloc_pd", (int) Verbs.DEALLOC_PD.invokeExact(pd));
            } catch (VerbsException e) {
                first = first != null ? first : e;
            } catch (Throwable t) {
                first = first != null ? first : IbvContext.downcall("ibv_dealloc_pd", t);
            }
            if (first != null) {
                throw first;
            }
        }
    }
}
