package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.AsyncEvent;
import io.mooncake4j.engine.rdma.verbs.DeviceAttributes;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.GidEntry;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.PortAttributes;
import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import io.mooncake4j.engine.rdma.verbs.RtrAttributes;
import io.mooncake4j.engine.rdma.verbs.RtsAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsException;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A test double for {@link RdmaProvider}: an in-process "fabric" of emulated RDMA devices.
 * RDMA WRITE/READ are memory copies between registered regions of two connected RC QPs; QPs
 * follow the verbs state machine (RESET → INIT → RTR → RTS, any → ERR, which flushes); signalled
 * work requests produce completions; errors behave as on RC hardware (an error completion moves
 * the QP to ERR and later requests complete with {@code WR_FLUSH_ERR}). Failures can be injected
 * per work request and per state transition.
 *
 * <p>By default work executes when posted; {@link #autoProgress(boolean) autoProgress(false)}
 * queues it until {@link #progress()} so tests can hold work outstanding. Not thread-safe
 * beyond one poster and one poller synchronising on the provider (all methods are synchronized).
 * Never shipped: test sources only.
 */
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
final class EmulatedRdmaProvider implements RdmaProvider {

    static final int EINVAL = 22, ENOMEM = 12, EBUSY = 16, EFAULT = 14, EOPNOTSUPP = 95, ETIMEDOUT = 110;

    /** What a transition may be made to fail with. */
    enum Transition { INIT, RTR, RTS, ERR }

    private final List<String> names;
    private final Map<String, EmuDevice> open = new LinkedHashMap<>();
    private final Map<Gid, EmuDevice> byGid = new HashMap<>();
    private final List<EmuQp> qps = new ArrayList<>();
    private final EnumMap<Transition, int[]> modifyFailures = new EnumMap<>(Transition.class); // {errno, remaining}
    private final List<String> teardownLog = new ArrayList<>();
    private int nextKey = 0x100;
    private int nextQpn = 0x11;
    private boolean autoProgress = true;
    private int sendQueueDepth;
    private int failStatus;
    private int failSkip;
    private int failCount;
    private int activeMtu = 5; // IBV_MTU_4096
    private int gidTableLength = 2;
    private long executedBytes;
    private long postCalls;
    private long postedRequests;
    private final List<String> pathLog = new ArrayList<>();
    private final List<String> registrationLog = new ArrayList<>();
    private boolean dmabuf;
    private int dmabufErrno;
    private long plainFailFrom;
    private long plainFailTo;
    private int plainFailErrno;
    private CyclicBarrier registrationRendezvous;
    private long rendezvousTimeoutMs;

    EmulatedRdmaProvider(String... deviceNames) {
        this.names = List.of(deviceNames);
    }

    // ---- knobs ----

    private final java.util.concurrent.atomic.AtomicInteger virtualControlCalls = new java.util.concurrent.atomic.AtomicInteger();

    private void noteControlCall() {
        if (Thread.currentThread().isVirtual()) {
            virtualControlCalls.incrementAndGet();
        }
    }

    /** {@code ibv_create_qp} / RTR calls made on a virtual thread (blocking downcalls would pin its carrier). */
    int virtualControlCalls() {
        return virtualControlCalls.get();
    }

    /**
     * Queues an asynchronous event on open device {@code device}, as the driver would
     * ({@code IBV_EVENT_PORT_ERR} when a link goes down, {@code PORT_ACTIVE}, {@code DEVICE_FATAL}, ...).
     */
    synchronized EmulatedRdmaProvider injectAsyncEvent(String device, int type, int port) {
        EmuDevice d = open.get(device);
        if (d == null) {
            throw new IllegalArgumentException("emulated device " + device + " is not open");
        }
        d.asyncEvents.add(new AsyncEvent(type, port));
        return this;
    }

    /**
     * Every {@code ibv_reg_mr} waits (outside the provider lock) until {@code parties}
     * registrations are inside it at the same time, at most {@code timeoutMs}; then it fails
     * with {@code ETIMEDOUT}. Shows whether devices are registered in parallel. Null clears it.
     */
    synchronized EmulatedRdmaProvider registrationRendezvous(int parties, long timeoutMs) {
        registrationRendezvous = parties <= 0 ? null : new CyclicBarrier(parties);
        rendezvousTimeoutMs = timeoutMs;
        return this;
    }

    /**
     * Send queues hold at most {@code n} pending work requests (0: as many as the QP was created
     * with): {@code ibv_post_send} fails with {@code ENOMEM} before the engine's {@code MC_MAX_WR}
     * count is reached, as on a driver whose queue is shallower than asked for. Shows only while
     * work is held ({@code autoProgress(false)}).
     */
    synchronized EmulatedRdmaProvider sendQueueDepth(int n) {
        sendQueueDepth = n;
        return this;
    }

    synchronized EmulatedRdmaProvider autoProgress(boolean on) {
        autoProgress = on;
        return this;
    }

    /** After {@code skip} more work requests execute normally, the next {@code count} complete with {@code status}. */
    synchronized EmulatedRdmaProvider failWorkRequests(int skip, int count, int status) {
        failSkip = skip;
        failCount = count;
        failStatus = status;
        return this;
    }

    /** The next {@code times} transitions to {@code t} fail with {@code errno}. */
    synchronized EmulatedRdmaProvider failTransition(Transition t, int errno, int times) {
        modifyFailures.put(t, new int[] {errno, times});
        return this;
    }

    /** Whether the emulated library has {@code ibv_reg_dmabuf_mr} (default: no). */
    synchronized EmulatedRdmaProvider dmabuf(boolean present) {
        dmabuf = present;
        return this;
    }

    /** Every {@code ibv_reg_dmabuf_mr} fails with {@code errno} (0: succeeds), as a driver without dma-buf support. */
    synchronized EmulatedRdmaProvider failDmabuf(int errno) {
        dmabufErrno = errno;
        return this;
    }

    /**
     * Plain {@code ibv_reg_mr} of any range overlapping {@code [from, to)} fails with {@code errno},
     * as a GPU pointer does when no peer-memory module is loaded.
     */
    synchronized EmulatedRdmaProvider failPlainRegistration(long from, long to, int errno) {
        plainFailFrom = from;
        plainFailTo = to;
        plainFailErrno = errno;
        return this;
    }

    /**
     * Successful registrations in order: {@code "reg emu0 0x<addr> <len>"} and
     * {@code "dmabuf emu0 offset=<o> len=<n> iova=0x<iova> fd=<fd>"}.
     */
    synchronized List<String> registrationLog() {
        return List.copyOf(registrationLog);
    }

    /** Memory regions open on every device now. */
    synchronized int liveMemoryRegions() {
        int n = 0;
        for (EmuDevice d : open.values()) {
            n += d.mrs.size();
        }
        return n;
    }

    synchronized EmulatedRdmaProvider activeMtu(int ibvMtu) {
        activeMtu = ibvMtu;
        return this;
    }

    /** Teardown steps in the order they happened ({@code "qp 17"}, {@code "cq"}, {@code "mr"}, {@code "pd"}, {@code "context emu0"}). */
    synchronized List<String> teardownLog() {
        return List.copyOf(teardownLog);
    }

    synchronized long executedBytes() {
        return executedBytes;
    }

    /** {@code ibv_post_send} calls that posted at least one request. */
    synchronized long postCalls() {
        return postCalls;
    }

    /** Work requests accepted by {@code ibv_post_send}. */
    synchronized long postedRequests() {
        return postedRequests;
    }

    /** One entry per executed work request: {@code "ok emu2->emu0"} or {@code "fail emu2->emu0"} (local device, peer device). */
    synchronized List<String> pathLog() {
        return List.copyOf(pathLog);
    }

    /** Executes every queued work request on every QP, in posting order per QP. */
    synchronized void progress() {
        for (EmuQp qp : List.copyOf(qps)) {
            while (!qp.pending.isEmpty()) {
                execute(qp, qp.pending.poll());
            }
        }
    }

    // ---- RdmaProvider ----

    @Override
    public synchronized List<String> deviceNames() {
        return names;
    }

    @Override
    public synchronized boolean supportsDmabuf() {
        return dmabuf;
    }

    @Override
    public synchronized Device open(String name) {
        int index = names.indexOf(name);
        if (index < 0) {
            throw new VerbsException("ibv_open_device", 0, "no emulated device " + name);
        }
        if (open.containsKey(name)) {
            throw new VerbsException("ibv_open_device", EBUSY, "emulated device " + name + " is already open");
        }
        EmuDevice d = new EmuDevice(name, index);
        open.put(name, d);
        for (int i = 0; i < gidTableLength; i++) {
            byGid.put(d.gid(1, i), d);
        }
        return d;
    }

    private void execute(EmuQp qp, Wr wr) {
        if (qp.state == IbvQp.STATE_ERR) {
            complete(qp, wr, WorkCompletions.WR_FLUSH_ERR, 0);
            return;
        }
        EmuQp target = peerOf(qp);
        String path = qp.device.name + "->" + (target == null ? "?" : target.device.name);
        if (failCount > 0 && failSkip-- <= 0) {
            failCount--;
            pathLog.add("fail " + path);
            fail(qp, wr, failStatus);
            return;
        }
        pathLog.add("ok " + path);
        EmuMr local = qp.device.findMr(wr.lkey, wr.local, wr.length, true);
        boolean read = wr.opcode == SendWorkRequests.OPCODE_RDMA_READ;
        if (local == null || (read && (local.access & IbvPd.ACCESS_LOCAL_WRITE) == 0)) {
            fail(qp, wr, WorkCompletions.LOC_PROT_ERR);
            return;
        }
        EmuQp peer = peerOf(qp);
        if (peer == null || (peer.state != IbvQp.STATE_RTR && peer.state != IbvQp.STATE_RTS)) {
            fail(qp, wr, WorkCompletions.RETRY_EXC_ERR); // nobody answers: transport retries run out
            return;
        }
        int need = read ? IbvPd.ACCESS_REMOTE_READ : IbvPd.ACCESS_REMOTE_WRITE;
        EmuMr remote = peer.device.findMr(wr.rkey, wr.remote, wr.length, false);
        if (remote == null || (remote.access & need) == 0 || (peer.access & need) == 0) {
            fail(qp, wr, WorkCompletions.REM_ACCESS_ERR);
            return;
        }
        MemorySegment src = MemorySegment.ofAddress(read ? wr.remote : wr.local).reinterpret(wr.length);
        MemorySegment dst = MemorySegment.ofAddress(read ? wr.local : wr.remote).reinterpret(wr.length);
        MemorySegment.copy(src, 0, dst, 0, wr.length);
        executedBytes += wr.length;
        if ((wr.flags & SendWorkRequests.SEND_SIGNALED) != 0) {
            complete(qp, wr, WorkCompletions.SUCCESS, wr.length);
        }
    }

    private void fail(EmuQp qp, Wr wr, int status) {
        complete(qp, wr, status, 0);
        toError(qp);
    }

    private void toError(EmuQp qp) {
        qp.state = IbvQp.STATE_ERR;
        while (!qp.pending.isEmpty()) {
            complete(qp, qp.pending.poll(), WorkCompletions.WR_FLUSH_ERR, 0);
        }
    }

    private void complete(EmuQp qp, Wr wr, int status, int byteLen) {
        EmuCq cq = qp.cq;
        if (cq.entries.size() >= cq.capacity) {
            cq.overrun = true; // hardware raises IBV_EVENT_CQ_ERR; polling then fails
            return;
        }
        int opcode = wr.opcode == SendWorkRequests.OPCODE_RDMA_READ
                ? WorkCompletions.OPCODE_RDMA_READ : WorkCompletions.OPCODE_RDMA_WRITE;
        cq.entries.add(new Wc(wr.wrId, status, opcode, byteLen, qp.qpn, status == 0 ? 0 : 0x81));
    }

    private EmuQp peerOf(EmuQp qp) {
        if (qp.destGid == null) {
            return null;
        }
        EmuDevice d = byGid.get(qp.destGid);
        if (d == null) {
            return null;
        }
        for (EmuQp q : qps) {
            if (q.device == d && q.qpn == qp.destQpn) {
                return q;
            }
        }
        return null;
    }

    private void checkInjected(Transition t, EmuQp qp) {
        int[] f = modifyFailures.get(t);
        if (f != null && f[1] > 0) {
            f[1]--;
            throw new VerbsException("ibv_modify_qp", f[0], String.format(Locale.ROOT,
                    "injected failure of QP %d to %s", qp.qpn, t));
        }
    }

    private static VerbsException invalid(EmuQp qp, String what) {
        return new VerbsException("ibv_modify_qp", EINVAL, String.format(Locale.ROOT, "QP %d: %s", qp.qpn, what));
    }

    private record Wr(long wrId, int opcode, int flags, long local, int length, int lkey, long remote, int rkey) {}

    private record Wc(long wrId, int status, int opcode, int byteLen, int qpNum, int vendorErr) {}

    private final class EmuDevice implements Device {
        final String name;
        final int index;
        final List<EmuMr> mrs = new ArrayList<>();
        final List<EmuCq> cqs = new ArrayList<>();
        final List<EmuQp> ownQps = new ArrayList<>();
        final LinkedBlockingQueue<AsyncEvent> asyncEvents = new LinkedBlockingQueue<>();
        boolean closed;

        EmuDevice(String name, int index) {
            this.name = name;
            this.index = index;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public boolean hasAsyncEvents() {
            return true;
        }

        @Override
        public AsyncEvent nextAsyncEvent(int timeoutMs) {
            try { // outside the provider lock: the reader waits here
                return asyncEvents.poll(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }

        @Override
        public DeviceAttributes attributes() {
            return new DeviceAttributes("emulated", index, 1L << 40, 0x02c9, 0, 1 << 17, 1 << 15, 30, 1 << 16,
                    1 << 22, 1 << 24, 1 << 24, 16, 16, 1);
        }

        @Override
        public PortAttributes port(int port) {
            synchronized (EmulatedRdmaProvider.this) {
                if (port != 1) {
                    throw new VerbsException("ibv_query_port", EINVAL, name + " has one port, asked for " + port);
                }
                return new PortAttributes(PortAttributes.PORT_ACTIVE, 5, activeMtu, gidTableLength, 0,
                        PortAttributes.LINK_LAYER_ETHERNET);
            }
        }

        @Override
        public Gid gid(int port, int gidIndex) {
            synchronized (EmulatedRdmaProvider.this) {
                if (port != 1 || gidIndex < 0 || gidIndex >= gidTableLength) {
                    throw new VerbsException("ibv_query_gid", 0, name + " port " + port + " index " + gidIndex);
                }
                byte[] raw = new byte[Gid.BYTES];
                if (gidIndex == 0) { // link-local fe80::
                    raw[0] = (byte) 0xfe;
                    raw[1] = (byte) 0x80;
                    raw[15] = (byte) (index + 1);
                } else { // ::ffff:10.0.0.(index+1), RoCE v2 style
                    raw[10] = (byte) 0xff;
                    raw[11] = (byte) 0xff;
                    raw[12] = 10;
                    raw[15] = (byte) (index + 1);
                }
                return new Gid(raw);
            }
        }

        @Override
        public GidEntry gidEntry(int port, int gidIndex) {
            return new GidEntry(gid(port, gidIndex), gidIndex, GidEntry.TYPE_ROCE_V2, 0);
        }

        @Override
        public MemoryRegion register(long address, long length, int access) {
            CyclicBarrier gate;
            synchronized (EmulatedRdmaProvider.this) {
                gate = registrationRendezvous;
            }
            if (gate != null) { // outside the provider lock, as a long pin runs outside any verbs lock
                try {
                    gate.await(rendezvousTimeoutMs, TimeUnit.MILLISECONDS);
                } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
                    gate.reset();
                    throw new VerbsException("ibv_reg_mr", ETIMEDOUT, "registration on " + name
                            + " was not joined by the other devices' registrations (registered one after another?)");
                }
            }
            synchronized (EmulatedRdmaProvider.this) {
                ensureOpen();
                if (address == 0 || length <= 0) {
                    throw new VerbsException("ibv_reg_mr", EINVAL, "empty or null range");
                }
                if (plainFailErrno != 0 && address < plainFailTo && address + length > plainFailFrom) {
                    throw new VerbsException("ibv_reg_mr", plainFailErrno, String.format(Locale.ROOT,
                            "addr 0x%x length %d: emulated GPU memory without a peer-memory module", address, length));
                }
                EmuMr mr = new EmuMr(this, address, length, access, nextKey++, nextKey++);
                mrs.add(mr);
                registrationLog.add(String.format(Locale.ROOT, "reg %s 0x%x %d", name, address, length));
                return mr;
            }
        }

        @Override
        public MemoryRegion registerDmabuf(long offset, long length, long iova, int fd, int access) {
            synchronized (EmulatedRdmaProvider.this) {
                ensureOpen();
                if (!dmabuf) {
                    throw new VerbsException("ibv_reg_dmabuf_mr", EOPNOTSUPP, "not provided by the emulated library");
                }
                if (dmabufErrno != 0) {
                    throw new VerbsException("ibv_reg_dmabuf_mr", dmabufErrno, "emulated driver refuses dma-bufs");
                }
                if (fd < 0 || iova == 0 || length <= 0 || offset < 0) {
                    throw new VerbsException("ibv_reg_dmabuf_mr", EINVAL, "bad fd, iova, offset or length");
                }
                EmuMr mr = new EmuMr(this, iova, length, access, nextKey++, nextKey++);
                mrs.add(mr);
                registrationLog.add(String.format(Locale.ROOT, "dmabuf %s offset=%d len=%d iova=0x%x fd=%d", name,
                        offset, length, iova, fd));
                return mr;
            }
        }

        @Override
        public CompletionQueue createCq(int cqe) {
            synchronized (EmulatedRdmaProvider.this) {
                ensureOpen();
                EmuCq cq = new EmuCq(this, cqe);
                cqs.add(cq);
                return cq;
            }
        }

        @Override
        public QueuePair createRcQp(CompletionQueue cq, QpCapabilities caps) {
            noteControlCall();
            synchronized (EmulatedRdmaProvider.this) {
                ensureOpen();
                EmuCq c = (EmuCq) cq;
                if (c.device != this) {
                    throw new VerbsException("ibv_create_qp", EINVAL, "CQ belongs to another device");
                }
                EmuQp qp = new EmuQp(this, c, nextQpn++, caps);
                c.attached++;
                ownQps.add(qp);
                qps.add(qp);
                return qp;
            }
        }

        EmuMr findMr(int key, long address, int length, boolean local) {
            for (EmuMr mr : mrs) {
                if ((local ? mr.lkey : mr.rkey) == key && !mr.closed && address >= mr.address
                        && address + length <= mr.address + mr.length) {
                    return mr;
                }
            }
            return null;
        }

        void ensureOpen() {
            if (closed) {
                throw new IllegalStateException("emulated device " + name + " is closed");
            }
        }

        /** As {@code IbvContext.close}: QPs to ERR, drain CQs, then QPs, CQs, MRs, PD, context. */
        @Override
        public void close() {
            synchronized (EmulatedRdmaProvider.this) {
                if (closed) {
                    return;
                }
                for (EmuQp qp : ownQps) {
                    toError(qp);
                }
                for (EmuCq cq : cqs) {
                    int drained = cq.entries.size();
                    cq.entries.clear();
                    teardownLog.add("drained " + drained);
                }
                for (EmuQp qp : List.copyOf(ownQps)) {
                    qp.close();
                }
                for (EmuCq cq : List.copyOf(cqs)) {
                    cq.close();
                }
                for (EmuMr mr : List.copyOf(mrs)) {
                    mr.close();
                }
                teardownLog.add("pd");
                teardownLog.add("context " + name);
                closed = true;
                open.remove(name);
                byGid.values().remove(this);
            }
        }
    }

    private final class EmuMr implements MemoryRegion {
        final EmuDevice device;
        final long address;
        final long length;
        final int access;
        final int lkey;
        final int rkey;
        boolean closed;

        EmuMr(EmuDevice device, long address, long length, int access, int lkey, int rkey) {
            this.device = device;
            this.address = address;
            this.length = length;
            this.access = access;
            this.lkey = lkey;
            this.rkey = rkey;
        }

        @Override
        public long address() {
            return address;
        }

        @Override
        public long length() {
            return length;
        }

        @Override
        public int lkey() {
            return lkey;
        }

        @Override
        public int rkey() {
            return rkey;
        }

        @Override
        public void close() {
            synchronized (EmulatedRdmaProvider.this) {
                if (!closed) {
                    closed = true;
                    device.mrs.remove(this);
                    teardownLog.add("mr");
                }
            }
        }
    }

    private final class EmuCq implements CompletionQueue {
        final EmuDevice device;
        final int capacity;
        final ArrayDeque<Wc> entries = new ArrayDeque<>();
        int attached;
        boolean overrun;
        boolean closed;

        EmuCq(EmuDevice device, int capacity) {
            this.device = device;
            this.capacity = capacity;
        }

        @Override
        public int poll(WorkCompletions wc) {
            synchronized (EmulatedRdmaProvider.this) {
                if (overrun) {
                    return -EINVAL;
                }
                int n = 0;
                while (n < wc.capacity() && !entries.isEmpty()) {
                    Wc e = entries.poll();
                    wc.set(n++, e.wrId(), e.status(), e.opcode(), e.byteLen(), e.qpNum(), e.vendorErr());
                }
                return n;
            }
        }

        @Override
        public void close() {
            synchronized (EmulatedRdmaProvider.this) {
                if (closed) {
                    return;
                }
                if (attached > 0) {
                    throw new VerbsException("ibv_destroy_cq", EBUSY, attached + " QP(s) still use this CQ");
                }
                closed = true;
                device.cqs.remove(this);
                teardownLog.add("cq");
            }
        }
    }

    private final class EmuQp implements QueuePair {
        final EmuDevice device;
        final EmuCq cq;
        final int qpn;
        final QpCapabilities caps;
        final ArrayDeque<Wr> pending = new ArrayDeque<>();
        int state = IbvQp.STATE_RESET;
        int access;
        Gid destGid;
        int destQpn;
        boolean closed;

        EmuQp(EmuDevice device, EmuCq cq, int qpn, QpCapabilities caps) {
            this.device = device;
            this.cq = cq;
            this.qpn = qpn;
            this.caps = caps;
        }

        @Override
        public int qpNum() {
            return qpn;
        }

        @Override
        public int state() {
            synchronized (EmulatedRdmaProvider.this) {
                return state;
            }
        }

        @Override
        public void modifyToInit(int portNum, int pkeyIndex, int accessFlags) {
            synchronized (EmulatedRdmaProvider.this) {
                if (state != IbvQp.STATE_RESET && state != IbvQp.STATE_INIT) {
                    throw invalid(this, "INIT only from RESET, state is " + state);
                }
                if (portNum != 1 || pkeyIndex != 0) {
                    throw invalid(this, "port " + portNum + " pkey_index " + pkeyIndex);
                }
                checkInjected(Transition.INIT, this);
                access = accessFlags;
                state = IbvQp.STATE_INIT;
            }
        }

        @Override
        public void modifyToRtr(RtrAttributes r) {
            noteControlCall();
            synchronized (EmulatedRdmaProvider.this) {
                if (state != IbvQp.STATE_INIT) {
                    throw invalid(this, "RTR only from INIT, state is " + state);
                }
                if (r.sgidIndex() < 0 || r.sgidIndex() >= gidTableLength || r.pathMtu() > activeMtu
                        || r.portNum() != 1 || r.destGid().isNull()) {
                    throw invalid(this, "bad address vector " + r);
                }
                checkInjected(Transition.RTR, this);
                destGid = r.destGid();
                destQpn = r.destQpNum();
                state = IbvQp.STATE_RTR;
            }
        }

        @Override
        public void modifyToRts(RtsAttributes r) {
            synchronized (EmulatedRdmaProvider.this) {
                if (state != IbvQp.STATE_RTR) {
                    throw invalid(this, "RTS only from RTR, state is " + state);
                }
                checkInjected(Transition.RTS, this);
                state = IbvQp.STATE_RTS;
            }
        }

        @Override
        public void modifyToError() {
            synchronized (EmulatedRdmaProvider.this) {
                checkInjected(Transition.ERR, this);
                toError(this);
            }
        }

        @Override
        public int postSend(SendWorkRequests wrs, int first) {
            synchronized (EmulatedRdmaProvider.this) {
                wrs.recordBadRequest(-1);
                if (state != IbvQp.STATE_RTS && state != IbvQp.STATE_ERR) {
                    wrs.recordBadRequest(first);
                    return EINVAL;
                }
                int depth = sendQueueDepth > 0 ? Math.min(sendQueueDepth, caps.maxSendWr()) : caps.maxSendWr();
                for (int i = first; i >= 0; i = wrs.next(i)) {
                    if (pending.size() >= depth) {
                        wrs.recordBadRequest(i);
                        return ENOMEM;
                    }
                    pending.add(new Wr(wrs.wrId(i), wrs.opcode(i), wrs.sendFlags(i), wrs.localAddr(i),
                            wrs.length(i), wrs.lkey(i), wrs.remoteAddr(i), wrs.rkey(i)));
                    postedRequests++;
                }
                postCalls++;
                if (autoProgress) {
                    progress();
                }
                return 0;
            }
        }

        @Override
        public void close() {
            synchronized (EmulatedRdmaProvider.this) {
                if (closed) {
                    return;
                }
                closed = true;
                pending.clear();
                cq.attached--;
                device.ownQps.remove(this);
                qps.remove(this);
                teardownLog.add("qp " + qpn);
            }
        }
    }
}
