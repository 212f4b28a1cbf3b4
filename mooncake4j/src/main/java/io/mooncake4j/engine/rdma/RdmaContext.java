package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.RdmaProvider.CompletionQueue;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One open RDMA device (Mooncake {@code RdmaContext}): its protection domain, one completion
 * queue of {@code MC_MAX_CQE_PER_CTX} entries, the endpoints keyed by peer NIC path, and one
 * poller thread ({@code mooncake-rdma-poller-N}) that polls the CQ 64 completions at a time as a
 * duty cycle: busy while work is outstanding (spinning briefly, then parking for microseconds),
 * parked until woken when nothing is.
 *
 * <p>Thread-safety: the endpoint map is concurrent; the CQ is polled only by the poller; the
 * outstanding count is atomic.
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code rdma_transport/rdma_context.cpp} ({@code RdmaContext}), {@code worker_pool.cpp} ({@code WorkerPool})
 */
final class RdmaContext {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaContext.class);
    private static final AtomicInteger POLLERS = new AtomicInteger();
    private static final int POLL_BATCH = 64;
    /** Busy-spin this long after the last completion before parking while work is outstanding. */
    private static final long SPIN_NS = 5_000L;
    /** One park step while work is outstanding. */
    private static final long PARK_NS = 20_000L;
    /** The poller thread's timer slack ({@code PR_SET_TIMERSLACK}). */
    private static final long TIMER_SLACK_NS = 1_000L;

    final int index;
    final String name;
    final Device device;
    final int lid;
    /** The GID in use; replaced by {@link #reprobeGid} after an RTR {@code EINVAL}. */
    volatile Gid gid;
    volatile int gidIndex;
    private final List<GidSelection.Choice> triedGids = new ArrayList<>();
    private int reprobes;
    final int activeMtu;
    final CompletionQueue cq;
    final String nicPath;
    private final int cqCapacity;
    private final AtomicInteger cqOutstanding = new AtomicInteger();
    private final ConcurrentHashMap<String, RdmaEndpoint> endpoints = new ConcurrentHashMap<>();
    /** Broken endpoints whose QPs still have outstanding work; destroyed once they are idle or at close. */
    private final ConcurrentHashMap<RdmaEndpoint, Boolean> retired = new ConcurrentHashMap<>();
    private final WorkCompletions wc = new WorkCompletions(POLL_BATCH);
    private final Thread poller;
    private volatile boolean running = true;
    private volatile boolean sleeping;
    /** Endpoints with queued slices that found no room (QP depth or CQ size); pumped after completions. */
    private final java.util.concurrent.ConcurrentLinkedQueue<RdmaEndpoint> awaitingRoom =
            new java.util.concurrent.ConcurrentLinkedQueue<>();
    /** Tests: runs on the posting thread (endpoint lock held) when it found no room, before it registers; null otherwise. */
    volatile Runnable beforeAwaitRoom;
    /** Times the poller went idle (nothing outstanding on the CQ); written by the poller only (tests). */
    private volatile long idleRounds;
    /** In NIC selection (false after a port or device failure event). */
    private volatile boolean active = true;
    /** A device fatal error was reported: out of selection for good. */
    private volatile boolean failed;

    RdmaContext(int index, Device device, int lid, Gid gid, int gidIndex, int activeMtu, int cqe, String nicPath,
            RdmaTransport engine) {
        this.index = index;
        this.name = device.name();
        this.device = device;
        this.lid = lid;
        this.gid = gid;
        this.gidIndex = gidIndex;
        this.activeMtu = activeMtu;
        this.cqCapacity = cqe;
        this.cq = device.createCq(cqe);
        this.nicPath = nicPath;
        this.poller = Thread.ofPlatform().daemon(true).name("mooncake-rdma-poller-" + POLLERS.getAndIncrement())
                .unstarted(() -> {
                    try {
                        pollLoop(engine);
                    } catch (Throwable t) { // last resort: logged, the thread ends
                        LOG.error("completion poller of {} died; transfers on this device will not complete", name, t);
                    }
                });
    }

    /** Whether new slices may use this NIC. */
    boolean isActive() {
        return active;
    }

    void setActive(boolean on) {
        active = on && !failed;
    }

    boolean isFailed() {
        return failed;
    }

    /** After {@code IBV_EVENT_DEVICE_FATAL}. */
    void markFailed() {
        failed = true;
        active = false;
    }

    void start() {
        poller.start();
    }

    Thread pollerThread() {
        return poller;
    }

    /**
     * After an RTR failure with {@code EINVAL} under automatic GID selection: switches to the
     * next-best untried GID of the port (spec §5.1), at most {@code MC_AUTO_GID_MAX_RETRIES}
     * times per device. True when the GID changed (new endpoints then use it, and the descriptor
     * publishes it).
     */
    synchronized boolean reprobeGid(RdmaSettings s, java.nio.file.Path sysfs) {
        if (!s.autoGid() || reprobes >= s.autoGidMaxRetries()) {
            return false;
        }
        int len = device.port(s.ibPort()).gidTblLen();
        java.util.Optional<GidSelection.Choice> next = GidSelection.reselect(
                GidSelection.probe(device, s.ibPort(), len, sysfs), gidIndex, gid, triedGids);
        if (next.isEmpty()) {
            return false;
        }
        triedGids.add(new GidSelection.Choice(gidIndex, gid, next.get().gidClass()));
        reprobes++;
        LOG.warn("{}: RTR failed with EINVAL on GID index {} ({}); re-probed to GID index {} ({}, {}), attempt {} of"
                + " MC_AUTO_GID_MAX_RETRIES={}", name, gidIndex, gid, next.get().index(), next.get().gid(),
                next.get().gidClass(), reprobes, s.autoGidMaxRetries());
        gid = next.get().gid();
        gidIndex = next.get().index();
        return true;
    }

    // ------------------------------------------------------------------ endpoints

    RdmaEndpoint endpoint(String peerNicPath) {
        return endpoints.get(peerNicPath);
    }

    /** The endpoint for {@code peerNicPath}, created with {@code factory} when absent; [endpoint, created?]. */
    RdmaEndpoint endpointOrCreate(String peerNicPath, java.util.function.Function<String, RdmaEndpoint> factory,
            boolean[] created) {
        RdmaEndpoint e = endpoints.get(peerNicPath);
        if (e != null) {
            return e;
        }
        created[0] = false;
        RdmaEndpoint r = endpoints.computeIfAbsent(peerNicPath, p -> {
            created[0] = true;
            return factory.apply(p);
        });
        return r;
    }

    /** Replaces whatever endpoint is mapped for the path (passive rebuild). */
    void put(RdmaEndpoint e) {
        endpoints.put(e.peerNicPath, e);
    }

    void forget(RdmaEndpoint e) {
        endpoints.remove(e.peerNicPath, e);
        retired.put(e, Boolean.TRUE);
    }

    List<RdmaEndpoint> endpoints() {
        return new ArrayList<>(endpoints.values());
    }

    List<RdmaEndpoint> retiredEndpoints() {
        return new ArrayList<>(retired.keySet());
    }

    int endpointCount() {
        return endpoints.size();
    }

    /**
     * Registers {@code e} (once) to be pumped when completions free room. The poller looks at the
     * registrations only after handling completions, so a caller that found no room must check
     * again after this call: completions handled between its check and the registration would
     * otherwise leave it stranded with nothing outstanding to bring the poller back.
     */
    void awaitRoom(RdmaEndpoint e) {
        Runnable hook = beforeAwaitRoom;
        if (hook != null) {
            hook.run();
        }
        if (e.awaitingRoom.compareAndSet(false, true)) {
            awaitingRoom.add(e);
        }
    }

    /**
     * Poller, after completions: pumps the endpoints that were waiting for room, each once (one
     * that still finds none registers again). Endpoints with nothing queued are not touched, so the
     * cost does not grow with the number of connected peers.
     */
    void pumpAwaiting(RdmaTransport engine) {
        for (int n = awaitingRoom.size(); n > 0; n--) {
            RdmaEndpoint e = awaitingRoom.poll();
            if (e == null) {
                return;
            }
            e.awaitingRoom.set(false);
            engine.pumpFromPoller(e);
        }
    }

    // ------------------------------------------------------------------ CQ accounting

    /**
     * Reserves up to {@code want} CQ entries at once and returns how many it got (0 when the CQ is
     * full). One atomic step, so endpoints posting concurrently on this context can never reserve
     * more than the CQ holds together (an overrun would put every QP on it in error); entries not
     * used must be given back with {@link #cqRelease(int)}.
     */
    int cqReserve(int want) {
        while (true) {
            int cur = cqOutstanding.get();
            int got = Math.min(want, cqCapacity - cur);
            if (got <= 0) {
                return 0;
            }
            if (cqOutstanding.compareAndSet(cur, cur + got)) {
                return got;
            }
        }
    }

    void cqRelease(int n) {
        cqOutstanding.addAndGet(-n);
    }

    void cqRelease() {
        cqOutstanding.decrementAndGet();
    }

    /** Whether at least one more CQ entry can be reserved now. */
    boolean cqHasRoom() {
        return cqOutstanding.get() < cqCapacity;
    }

    int cqOutstanding() {
        return cqOutstanding.get();
    }

    /** How often the poller went idle (tests: after this advances, it has handled every completion before). */
    long idleRounds() {
        return idleRounds;
    }

    void wakePoller() {
        if (sleeping) {
            LockSupport.unpark(poller);
        }
    }

    // ------------------------------------------------------------------ poller

    /** CPUs the poller binds itself to (those of its NIC's NUMA node, as Mooncake's {@code bindToSocket}); empty: none. */
    private volatile java.util.BitSet pollerCpus = new java.util.BitSet();
    private volatile int numaNode = -1;

    /** Before {@link #start}: the NIC's NUMA node and that node's CPUs. */
    void placePoller(int node, java.util.BitSet cpus) {
        numaNode = node;
        pollerCpus = (java.util.BitSet) cpus.clone();
    }

    private void pollLoop(RdmaTransport engine) {
        java.util.BitSet cpus = pollerCpus;
        if (!cpus.isEmpty()) {
            if (io.mooncake4j.internal.sys.ThreadTuning.bindToCpus(cpus)) {
                LOG.debug("{}: poller bound to NUMA node {} (CPUs {})", name, numaNode, cpus);
            } else {
                LOG.info("{}: poller not bound to NUMA node {} (CPUs {} refused by the kernel or cpuset)", name,
                        numaNode, cpus);
            }
        }
        if (!io.mooncake4j.internal.sys.ThreadTuning.setTimerSlackNanos(TIMER_SLACK_NS)) {
            LOG.debug("{}: timer slack of the poller not set; its parks may last ~50 µs longer", name);
        }
        int idle = 0;
        long spinUntil = 0;
        while (running) {
            int n;
            try {
                n = cq.poll(wc);
            } catch (RuntimeException e) {
                LOG.error("polling the CQ of {} failed; failing its outstanding work", name, e);
                n = -1;
            }
            if (n < 0) {
                LOG.error("ibv_poll_cq on {} returned {}; the CQ is unusable (overrun?), endpoints rebuilt", name, n);
                engine.contextFailed(this);
                LockSupport.parkNanos(this, 1_000_000L);
                continue;
            }
            if (n > 0) {
                idle = 0;
                for (int i = 0; i < n; i++) {
                    try {
                        engine.onCompletion(this, wc.wrId(i), wc.status(i), wc.vendorErr(i));
                    } catch (RuntimeException e) {
                        LOG.error("handling a completion on {} failed", name, e);
                    }
                }
                try {
                    pumpAwaiting(engine); // completions made room
                } catch (RuntimeException e) {
                    LOG.error("posting on {} failed", name, e);
                }
                continue;
            }
            if (!retired.isEmpty()) {
                for (RdmaEndpoint r : retired.keySet()) {
                    r.destroyIfIdle();
                    if (r.outstandingTotal() == 0) {
                        retired.remove(r);
                    }
                }
            }
            if (cqOutstanding.get() > 0) {
                // busy while work is outstanding: spin for SPIN_NS after the last completion (a 100 Gb/s NIC
                // completes 64 KiB in ~5 µs; longer spins starve submitters where cores are scarce), then park in
                // short steps; with the timer slack set to 1 µs a 20 µs park
                // lasts about 20 µs rather than 70 µs
                if (idle++ == 0) {
                    spinUntil = System.nanoTime() + SPIN_NS;
                }
                if ((idle & 63) != 0 || System.nanoTime() - spinUntil < 0) {
                    Thread.onSpinWait();
                } else {
                    LockSupport.parkNanos(this, PARK_NS);
                }
            } else {
                idleRounds = idleRounds + 1; // single writer
                sleeping = true;
                if (cqOutstanding.get() == 0 && running) {
                    LockSupport.parkNanos(this, 50_000_000L);
                }
                sleeping = false;
                idle = 0;
            }
        }
    }

    /**
     * Stops the poller and waits for it (10 s). False when it is still running (stuck in
     * {@code ibv_poll_cq} or a completion handler): then the CQ, its QPs and the device must not
     * be destroyed under it.
     */
    boolean stopPoller() {
        running = false;
        LockSupport.unpark(poller);
        if (poller.isAlive() && Thread.currentThread() != poller) {
            try {
                if (!poller.join(java.time.Duration.ofSeconds(10))) {
                    LOG.error("poller {} did not stop within 10 s", poller.getName());
                    return false;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return !poller.isAlive();
            }
        }
        return true;
    }

    /** Teardown after the poller stopped: QPs, then the CQ, then the caller closes MRs and the device. */
    void closeQueues() {
        for (RdmaEndpoint e : endpoints()) {
            e.destroyNow();
        }
        for (RdmaEndpoint e : retiredEndpoints()) {
            e.destroyNow();
        }
        endpoints.clear();
        retired.clear();
        try {
            cq.close();
        } catch (RuntimeException e) {
            LOG.warn("destroying the CQ of {} failed: {}", name, e.getMessage());
        }
        wc.close();
    }
}
