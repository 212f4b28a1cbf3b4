package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.Locale;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The initiator side towards one peer data port: a queue of submitted work and
 * {@link TcpConfig#lanesPerPeer()} {@link Lane}s that drain it over persistent connections.
 * A connect failure or an I/O error that is not a rejection marks the peer dead: queued work
 * fails, the lanes stop, and the engine fetches a fresh descriptor before the next submission
 * (the peer may have restarted on other ports). Thread-safe.
 */
final class Peer {

    private static final Logger LOG = LoggerFactory.getLogger(Peer.class);

    /**
     * Tasks of one submission to this peer, claimed one at a time by the lanes: the indices in
     * {@code tasks}, or the range {@code [next, end)} when {@code tasks} is null.
     */
    private static final class Work {
        final BatchTasks batch;
        final int[] tasks;
        final int end;
        int next;

        Work(BatchTasks batch, int[] tasks) {
            this.batch = batch;
            this.tasks = tasks;
            this.end = tasks.length;
        }

        Work(BatchTasks batch, int from, int to) {
            this.batch = batch;
            this.tasks = null;
            this.next = from;
            this.end = to;
        }

        int task(int k) {
            return tasks == null ? k : tasks[k];
        }
    }

    final long segmentId;
    /** The core's segment, told when a lane finds our own data endpoint there. */
    final RemoteSegment segment;
    final SegmentDescriptor descriptor;
    final InetSocketAddress dataAddress;
    /** This engine's own data port: a lane never connects to it on an address of this host. */
    final int ownDataPort;
    /** This engine's tag, in every request header ({@link TcpWire#tag}). */
    final long ownTag;
    final TcpConfig config;
    final LocalMemory memory;
    final Lane[] lanes;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition notEmpty = lock.newCondition();
    private final ArrayDeque<Work> queue = new ArrayDeque<>();
    private volatile boolean dead;
    private volatile boolean retired;
    private volatile String deadReason;
    /** When work was last queued or a lane last finished staging (System.nanoTime). */
    private volatile long lastUsed = System.nanoTime();

    Peer(RemoteSegment segment, SegmentDescriptor descriptor, TcpConfig config, LocalMemory memory, int serial,
            int ownDataPort, long ownTag) {
        this.segment = segment;
        this.ownTag = ownTag;
        this.segmentId = segment.id();
        this.ownDataPort = ownDataPort;
        this.descriptor = descriptor;
        this.dataAddress = InetSocketAddress.createUnresolved(descriptor.host(), descriptor.tcpDataPort());
        this.config = config;
        this.memory = memory;
        this.lanes = new Lane[config.lanesPerPeer()];
        for (int i = 0; i < lanes.length; i++) {
            lanes[i] = new Lane(this, serial + "-" + i);
        }
        for (Lane l : lanes) {
            l.start();
        }
    }

    /**
     * Whether {@code target}, as resolved for a connection now, is this engine's own data endpoint: our
     * data port on an address of this host (loopback, wildcard or a local interface). Checked at each
     * connect, so a name whose DNS answer changed after the segment was opened cannot aim us at ourselves.
     */
    static boolean isOwnDataEndpoint(InetSocketAddress target, int ownDataPort) {
        java.net.InetAddress a = target.getAddress();
        if (ownDataPort <= 0 || target.getPort() != ownDataPort || a == null) {
            return false;
        }
        if (a.isLoopbackAddress() || a.isAnyLocalAddress()) {
            return true;
        }
        try {
            return java.net.NetworkInterface.getByInetAddress(a) != null;
        } catch (java.io.IOException e) {
            return false; // the interfaces cannot be listed: the connect decides
        }
    }

    /** Whether requests to this peer use v2 framing now. */
    boolean v2() {
        return descriptor.tcpProtoVersion() >= 2 && !config.forceV1();
    }

    boolean isDead() {
        return dead;
    }

    /** Whether this peer was closed for idleness ({@link #retireIfIdle}), not for a failure. */
    boolean isRetired() {
        return retired;
    }

    /** When this peer was last used (System.nanoTime). */
    long lastUsed() {
        return lastUsed;
    }

    void touch() {
        lastUsed = System.nanoTime();
    }

    /**
     * Closes this peer if it holds no work (nothing queued, no lane holding a task) and was unused
     * since {@code unusedSinceNanos}: its lanes stop and their threads exit. Work queued afterwards
     * is refused by {@link #offer} (not failed), so the engine opens a fresh peer for it.
     *
     * @return whether the peer was retired
     */
    boolean retireIfIdle(long unusedSinceNanos) {
        lock.lock();
        try {
            if (dead || lastUsed - unusedSinceNanos > 0 || !queue.isEmpty()) {
                return false;
            }
            for (Lane l : lanes) {
                if (!l.idle()) {
                    return false;
                }
            }
            retired = true;
            dead = true;
            notEmpty.signalAll();
        } finally {
            lock.unlock();
        }
        for (Lane l : lanes) {
            l.stop();
        }
        return true;
    }

    /**
     * Queues the tasks {@code [from, to)} of {@code batch} unless this peer was retired for
     * idleness; false (nothing failed) when it was, so that the caller opens a fresh peer.
     */
    boolean offer(BatchTasks batch, int from, int to) {
        return offer(new Work(batch, from, to));
    }

    /** Like {@link #offer(BatchTasks, int, int)} for the given task indices. */
    boolean offer(BatchTasks batch, int[] tasks) {
        return offer(new Work(batch, tasks));
    }

    private boolean offer(Work w) {
        lock.lock();
        try {
            if (retired) {
                return false;
            }
            lastUsed = System.nanoTime();
            enqueue(w); // reentrant: queued before a retirement can look at the queue
            return true;
        } finally {
            lock.unlock();
        }
    }

    String deadReason() {
        return deadReason;
    }

    /** Queues tasks of {@code batch}; they fail at once if this peer is dead. */
    void enqueue(BatchTasks batch, int[] tasks) {
        enqueue(new Work(batch, tasks));
    }

    /** Queues the tasks {@code [from, to)} of {@code batch} (tasks already terminal are skipped by the lanes). */
    void enqueue(BatchTasks batch, int from, int to) {
        enqueue(new Work(batch, from, to));
    }

    private void enqueue(Work w) {
        lock.lock();
        try {
            if (dead) {
                for (int k = w.next; k < w.end; k++) {
                    w.batch.fail(w.task(k), TcpTransport.NAME, SliceFailure.TRANSIENT, "peer connection closed");
                }
                return;
            }
            queue.addLast(w);
            notEmpty.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Blocks until a task is available and claims it: returns its batch and stores its index in
     * {@link Lane#claimed}; null when the peer is dead or closed.
     */
    BatchTasks claim(Lane lane) throws InterruptedException {
        lock.lock();
        try {
            while (true) {
                if (dead) {
                    return null;
                }
                Work w = queue.peekFirst();
                if (w == null) {
                    notEmpty.await();
                    continue;
                }
                if (w.batch.aborted() || w.next >= w.end) {
                    queue.pollFirst();
                    continue;
                }
                lane.claimed = w.task(w.next++);
                lane.busy = true;
                if (w.next == w.end) {
                    queue.pollFirst();
                }
                return w.batch;
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Claims the next task without waiting (to stage several small requests into one write):
     * its batch, or null when nothing is queued right now.
     */
    BatchTasks tryClaim(Lane lane) {
        lock.lock();
        try {
            while (!dead) {
                Work w = queue.peekFirst();
                if (w == null) {
                    return null;
                }
                if (w.batch.aborted() || w.next >= w.end) {
                    queue.pollFirst();
                    continue;
                }
                lane.claimed = w.task(w.next++);
                if (w.next == w.end) {
                    queue.pollFirst();
                }
                return w.batch;
            }
            return null;
        } finally {
            lock.unlock();
        }
    }

    /** Marks the peer dead: queued tasks fail, lanes close their sockets and stop. */
    void fail(String reason) {
        lock.lock();
        try {
            if (dead) {
                return;
            }
            deadReason = reason;
            dead = true;
            for (Work w : queue) {
                for (int k = w.next; k < w.end; k++) {
                    w.batch.fail(w.task(k), TcpTransport.NAME, SliceFailure.TRANSIENT, "peer connection closed");
                }
            }
            queue.clear();
            notEmpty.signalAll();
        } finally {
            lock.unlock();
        }
        if (reason != null) {
            LOG.warn("peer {} (data {}:{}) failed: {}", descriptor.name(), dataAddress.getHostString(),
                    dataAddress.getPort(), reason);
        }
        for (Lane l : lanes) {
            l.stop();
        }
    }

    /** Kills the lanes working on {@code batch} (after it was aborted) and waits until they left it. */
    void evict(BatchTasks batch, long deadlineNanos) {
        for (Lane l : lanes) {
            if (l.touches(batch)) {
                l.kill("batch " + batch.id() + " aborted");
            }
        }
        for (Lane l : lanes) {
            l.awaitNotUsing(batch, deadlineNanos);
        }
    }

    /** Closes: like {@link #fail} without the log line, and joins the lane threads. */
    void close() {
        fail(null);
        for (Lane l : lanes) {
            l.join();
        }
    }

    /** Checks status-frame deadlines (called by the engine's watchdog). */
    void checkDeadlines(long now) {
        for (Lane l : lanes) {
            l.checkDeadline(now);
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "Peer[%s data=%s:%d]", descriptor.name(), dataAddress.getHostString(),
                dataAddress.getPort());
    }
}
