package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An open device ({@code struct ibv_context}). Owns every PD, MR, CQ and QP created from it and
 * closes them in the order QPs, CQs, MRs, PDs, then the context: QPs are first moved to ERR and
 * the CQs drained so the NIC no longer touches registered memory.
 *
 * <p>Control-path methods synchronise on this object, except memory registration (long pins must
 * not hold up QP creation and modification): registrations are counted while in flight and
 * {@link #close} waits for them. {@link #nextAsyncEvent} is called by one reader thread, which
 * stops before {@link #close}. The ops function pointers are read once at open and handed to
 * each CQ and QP.
 */
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
public final class IbvContext implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(IbvContext.class);
    /** Completions drained per poll during teardown. */
    private static final int DRAIN_BATCH = 64;

    private final DeviceInfo device;
    private final MemorySegment context;
    final MemorySegment opsPostSend;
    final MemorySegment opsPollCq;
    private final List<IbvPd> pds = new ArrayList<>();
    private final List<IbvCq> cqs = new ArrayList<>();
    private final List<IbvQp> qps = new ArrayList<>();
    private boolean closed;

    /** Wraps an open {@code struct ibv_context *} (sized); {@link #open} is the normal way in. */
    IbvContext(DeviceInfo device, MemorySegment context) {
        this.device = device;
        this.context = context;
        this.opsPostSend = context.get(ADDRESS, VerbsLayouts.CONTEXT_OPS_POST_SEND);
        this.opsPollCq = context.get(ADDRESS, VerbsLayouts.CONTEXT_OPS_POLL_CQ);
    }

    static IbvContext open(MemorySegment devicePtr, DeviceInfo info) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment ctx = (MemorySegment) Verbs.OPEN_DEVICE.invokeExact(capture, devicePtr);
            if (ctx.equals(MemorySegment.NULL)) {
                int errno = Verbs.errno(capture);
                throw new VerbsException("ibv_open_device", errno, "device " + info.name());
            }
            return new IbvContext(info, ctx.reinterpret(VerbsLayouts.IBV_CONTEXT.byteSize()));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_open_device", t);
        }
    }

    public DeviceInfo device() {
        return device;
    }

    public String name() {
        return device.name();
    }

    MemorySegment segment() {
        return context;
    }

    public synchronized DeviceAttributes queryDevice() {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(VerbsLayouts.IBV_DEVICE_ATTR);
            int rc = (int) Verbs.QUERY_DEVICE.invokeExact(context, a);
            check("ibv_query_device", rc);
            var l = VerbsLayouts.IBV_DEVICE_ATTR;
            return new DeviceAttributes(
                    a.getString(0),
                    a.get(JAVA_LONG, off(l, "node_guid")),
                    a.get(JAVA_LONG, off(l, "max_mr_size")),
                    a.get(JAVA_INT, off(l, "vendor_id")),
                    a.get(JAVA_INT, off(l, "vendor_part_id")),
                    a.get(JAVA_INT, off(l, "max_qp")),
                    a.get(JAVA_INT, off(l, "max_qp_wr")),
                    a.get(JAVA_INT, off(l, "max_sge")),
                    a.get(JAVA_INT, off(l, "max_cq")),
                    a.get(JAVA_INT, off(l, "max_cqe")),
                    a.get(JAVA_INT, off(l, "max_mr")),
                    a.get(JAVA_INT, off(l, "max_pd")),
                    a.get(JAVA_INT, off(l, "max_qp_rd_atom")),
                    a.get(JAVA_INT, off(l, "max_qp_init_rd_atom")),
                    Byte.toUnsignedInt(a.get(JAVA_BYTE, off(l, "phys_port_cnt"))));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_query_device", t);
        }
    }

    public synchronized PortAttributes queryPort(int port) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(VerbsLayouts.IBV_PORT_ATTR); // zeroed: port_cap_flags2 stays 0
            int rc = (int) Verbs.QUERY_PORT.invokeExact(context, (byte) port, a);
            check("ibv_query_port", rc);
            return new PortAttributes(
                    a.get(JAVA_INT, VerbsLayouts.PORT_STATE),
                    a.get(JAVA_INT, VerbsLayouts.PORT_MAX_MTU),
                    a.get(JAVA_INT, VerbsLayouts.PORT_ACTIVE_MTU),
                    a.get(JAVA_INT, VerbsLayouts.PORT_GID_TBL_LEN),
                    Short.toUnsignedInt(a.get(JAVA_SHORT, VerbsLayouts.PORT_LID)),
                    Byte.toUnsignedInt(a.get(JAVA_BYTE, VerbsLayouts.PORT_LINK_LAYER)));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_query_port", t);
        }
    }

    public synchronized Gid queryGid(int port, int index) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment g = arena.allocate(VerbsLayouts.IBV_GID);
            int rc = (int) Verbs.QUERY_GID.invokeExact(context, (byte) port, index, g);
            if (rc != 0) { // returns -1; errno is not documented for this verb
                throw new VerbsException("ibv_query_gid", 0, String.format(Locale.ROOT,
                        "device %s port %d index %d", device.name(), port, index));
            }
            return new Gid(g.toArray(JAVA_BYTE));
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_query_gid", t);
        }
    }

    /** {@code ibv_query_gid_ex}; requires the {@code ibv_query_gid_ex} capability. */
    public synchronized GidEntry queryGidEntry(int port, int index) {
        ensureOpen();
        if (!Verbs.HAS_QUERY_GID_EX) {
            throw new VerbsException("ibv_query_gid_ex", Verbs.EOPNOTSUPP, "not provided by this " + Verbs.LIBRARY);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment e = arena.allocate(VerbsLayouts.IBV_GID_ENTRY);
            int rc = (int) Verbs.QUERY_GID_EX.invokeExact(context, port, index, e, 0,
                    VerbsLayouts.IBV_GID_ENTRY.byteSize());
            check("ibv_query_gid_ex", rc);
            return new GidEntry(
                    new Gid(e.asSlice(VerbsLayouts.GID_ENTRY_GID, Gid.BYTES).toArray(JAVA_BYTE)),
                    e.get(JAVA_INT, VerbsLayouts.GID_ENTRY_GID_INDEX),
                    e.get(JAVA_INT, VerbsLayouts.GID_ENTRY_GID_TYPE),
                    e.get(JAVA_INT, VerbsLayouts.GID_ENTRY_NDEV_IFINDEX));
        } catch (VerbsException ex) {
            throw ex;
        } catch (Throwable t) {
            throw downcall("ibv_query_gid_ex", t);
        }
    }

    public synchronized IbvPd allocPd() {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment pd = (MemorySegment) Verbs.ALLOC_PD.invokeExact(capture, context);
            if (pd.equals(MemorySegment.NULL)) {
                throw new VerbsException("ibv_alloc_pd", Verbs.errno(capture), "device " + device.name());
            }
            IbvPd p = new IbvPd(this, pd.reinterpret(VerbsLayouts.IBV_PD.byteSize()));
            pds.add(p);
            return p;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_alloc_pd", t);
        }
    }

    /** A CQ of at least {@code cqe} entries, without completion channel (polled). */
    public synchronized IbvCq createCq(int cqe) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment capture = arena.allocate(Verbs.CAPTURE_LAYOUT);
            MemorySegment cq = (MemorySegment) Verbs.CREATE_CQ.invokeExact(capture, context, cqe,
                    MemorySegment.NULL, MemorySegment.NULL, 0);
            if (cq.equals(MemorySegment.NULL)) {
                throw new VerbsException("ibv_create_cq", Verbs.errno(capture), String.format(Locale.ROOT,
                        "device %s cqe %d (device limit: max_cqe)", device.name(), cqe));
            }
            IbvCq c = new IbvCq(this, cq.reinterpret(VerbsLayouts.IBV_CQ.byteSize()));
            cqs.add(c);
            return c;
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_create_cq", t);
        }
    }

    private int callsInFlight;

    synchronized void adopt(IbvQp qp) {
        qps.add(qp);
    }

    synchronized void forget(Object child) {
        qps.remove(child);
        cqs.remove(child);
        pds.remove(child);
    }

    /**
     * The next asynchronous event of this device ({@code ibv_get_async_event}, acknowledged at
     * once with {@code ibv_ack_async_event}), waiting at most {@code timeoutMs} for one on the
     * context's async fd ({@code poll(2)}), or null when none came. One reader thread at a time;
     * not under this monitor (it waits), and the caller stops reading before {@link #close}.
     */
    public AsyncEvent nextAsyncEvent(int timeoutMs) {
        if (Verbs.POLL == null) {
            throw new VerbsException("poll", 0, "libc poll(2) is not reachable through FFM");
        }
        int fd = context.get(JAVA_INT, VerbsLayouts.CONTEXT_ASYNC_FD);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pfd = arena.allocate(8, 4); // struct pollfd { int fd; short events; short revents; }
            pfd.set(JAVA_INT, 0, fd);
            pfd.set(JAVA_SHORT, 4, POLLIN);
            int ready = (int) Verbs.POLL.invokeExact(pfd, 1L, timeoutMs);
            if (ready <= 0 || (pfd.get(JAVA_SHORT, 6) & POLLIN) == 0) {
                return null; // timeout, EINTR, or only POLLERR/POLLHUP (the caller retries after its timeout)
            }
            MemorySegment ev = arena.allocate(VerbsLayouts.IBV_ASYNC_EVENT);
            int rc = (int) Verbs.GET_ASYNC_EVENT.invokeExact(context, ev);
            if (rc != 0) {
                return null;
            }
            int type = ev.get(JAVA_INT, VerbsLayouts.ASYNC_EVENT_TYPE);
            int port = AsyncEvent.isPortEvent(type) ? ev.get(JAVA_INT, VerbsLayouts.ASYNC_EVENT_PORT_NUM) : 0;
            Verbs.ACK_ASYNC_EVENT.invokeExact(ev);
            return new AsyncEvent(type, port);
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw downcall("ibv_get_async_event", t);
        }
    }

    private static final short POLLIN = 1;

    /** A verb that runs outside this monitor (memory registration) starts; close waits for it. */
    synchronized void enterCall() {
        ensureOpen();
        callsInFlight++;
    }

    synchronized void exitCall() {
        if (--callsInFlight == 0) {
            notifyAll();
        }
    }

    /** Waits (releasing the monitor) until no verb started with {@link #enterCall} is running. */
    synchronized void awaitNoCalls() {
        boolean interrupted = false;
        while (callsInFlight > 0) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true; // the native objects must not be freed under a running verb
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    synchronized void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("RDMA context " + device.name() + " is closed");
        }
    }

    /**
     * Moves every QP to ERR, drains the CQs, then destroys QPs, CQs, MRs (through their PDs),
     * PDs and the context. Errors are logged and the teardown continues; the first one is
     * rethrown at the end.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        awaitNoCalls();
        VerbsException first = null;
        for (IbvQp qp : qps) {
            try {
                qp.modifyToError();
            } catch (VerbsException e) {
                LOG.warn("{}: moving QP {} to ERR before teardown failed: {}", device.name(), qp.qpNum(), e.getMessage());
            }
        }
        try (WorkCompletions wc = new WorkCompletions(DRAIN_BATCH)) {
            for (IbvCq cq : cqs) {
                int n;
                while ((n = cq.poll(wc)) > 0) {
                    LOG.debug("{}: drained {} completions at teardown", device.name(), n);
                }
            }
        }
        for (IbvQp qp : List.copyOf(qps)) {
            first = closeQuietly(qp, first);
        }
        for (IbvCq cq : List.copyOf(cqs)) {
            first = closeQuietly(cq, first);
        }
        for (IbvPd pd : List.copyOf(pds)) {
            first = closeQuietly(pd, first); // closes its MRs first
        }
        try {
            int rc = (int) Verbs.CLOSE_DEVICE.invokeExact(context);
            if (rc != 0) {
                first = first != null ? first : new VerbsException("ibv_close_device", 0, "device " + device.name());
            }
        } catch (Throwable t) {
            first = first != null ? first : downcall("ibv_close_device", t);
        }
        if (first != null) {
            throw first;
        }
    }

    private VerbsException closeQuietly(AutoCloseable c, VerbsException first) {
        try {
            c.close();
            return first;
        } catch (VerbsException e) {
            LOG.warn("{}: teardown: {}", device.name(), e.getMessage());
            return first != null ? first : e;
        } catch (Exception e) {
            LOG.warn("{}: teardown: {}", device.name(), e.toString());
            return first != null ? first : new VerbsException("teardown", 0, e.toString());
        }
    }

    static void check(String op, int rc) {
        if (rc != 0) {
            throw new VerbsException(op, rc, "see " + op + "(3)");
        }
    }

    static VerbsException downcall(String op, Throwable t) {
        return new VerbsException(op, 0, "downcall failed: " + t);
    }

    private static long off(GroupLayout l, String name) {
        return l.byteOffset(MemoryLayout.PathElement.groupElement(name));
    }

    @Override
    public String toString() {
        return "IbvContext[" + device.name() + "]";
    }
}
