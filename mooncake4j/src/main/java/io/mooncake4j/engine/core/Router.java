package io.mooncake4j.engine.core;

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.Transport;
import io.mooncake4j.engine.spi.TransportCapabilities;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Per-request transport selection (Mooncake TENT's shape): each slice goes to the first installed
 * transport, in the core's order (the declared preferences: {@code cuda-ipc}, {@code shm},
 * {@code rdma}, {@code tcp}), whose
 * capabilities move its memory kinds, that speaks a wire the peer speaks (C++ peers get only
 * Mooncake's), that was not found unable to reach the peer, and whose
 * {@link Transport#canTransfer} accepts the pair of buffers. A slice failed with a retryable
 * {@link SliceFailure} moves on to the next such transport (at most one attempt per transport,
 * counted, logged once per peer and transport). Also the local short-circuit: a transfer to the own
 * segment is one copy, host to host here, anything touching device memory by a transport that can.
 *
 * <p>Thread-safe; submissions from many threads at once. Host-to-host local copies hold the read
 * side of {@link #localCopies}, unregistration its write side.
 */
final class Router {

    private static final Logger LOG = LoggerFactory.getLogger(Router.class);
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    private static final int WRITE = io.mooncake4j.engine.TransferRequest.Opcode.WRITE.wire();

    private final Transport[] transports;
    private final TransportCapabilities[] caps;
    private final BufferRegistry registry;
    /** Local host copies (read) against unregistration (write). */
    final ReadWriteLock localCopies = new ReentrantReadWriteLock();
    private final AtomicLong fallbacks = new AtomicLong();
    private final AtomicLong unroutable = new AtomicLong();
    /** Per transport (index as in {@link #transports}): bytes of the slices handed to it, fallbacks included. */
    private final AtomicLong[] routedBytes;

    Router(Transport[] transports, BufferRegistry registry) {
        this.transports = transports;
        this.registry = registry;
        this.caps = new TransportCapabilities[transports.length];
        this.routedBytes = new AtomicLong[transports.length];
        for (int i = 0; i < transports.length; i++) {
            routedBytes[i] = new AtomicLong();
        }
        for (int i = 0; i < transports.length; i++) {
            caps[i] = transports[i].capabilities();
        }
    }

    /** Slices moved on to another transport after a retryable failure, so far. */
    long fallbacks() {
        return fallbacks.get();
    }

    /** Slices no installed transport could take, so far. */
    long unroutable() {
        return unroutable.get();
    }

    /** The index of the installed transport called {@code name}, or -1. */
    int indexOf(String name) {
        for (int t = 0; t < transports.length; t++) {
            if (transports[t].name().equals(name)) {
                return t;
            }
        }
        return -1;
    }

    /** How many transports this router selects among. */
    int size() {
        return transports.length;
    }

    /** Bytes of the slices handed to transport {@code t} so far (a slice that fell back counts for both). */
    long routedBytes(int t) {
        return routedBytes[t].get();
    }

    /** Whether some installed transport reaches {@code p} at all. */
    boolean reachable(CorePeer p) {
        for (Transport t : transports) {
            if (t.reaches(p)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Routes tasks of {@code b} bound for {@code p}: the run {@code [from, from+n)} when {@code idx}
     * is null, else the tasks listed in {@code idx[0..n)}. Ranges are checked against the local
     * registry and the peer's cached descriptor (refreshed once on a miss); what cannot go anywhere
     * fails now.
     */
    void route(TaskBatch b, CorePeer p, int from, int n, int[] idx) {
        b.router = this;
        // per task: b.localBuf[i] (null when dropped here) and b.via[i]; nothing allocated per task
        LocalBuffer[] lbs = b.localBuf;
        BufferRegistry.Buffer lastBuffer = null; // consecutive tasks mostly lie in one buffer
        LocalBuffer lastLocal = null;
        SegmentDescriptor.Buffer lastRemote = null; // and go to one peer buffer: the same choice again
        boolean lastSpans = false;
        int lastChoice = -1;
        boolean refreshed = false;
        int first = -1;
        boolean uniform = true;
        int kept = 0;
        for (int k = 0; k < n; k++) {
            int i = idx == null ? from + k : idx[k];
            lbs[i] = null;
            if (b.isTerminal(i)) {
                uniform = false;
                continue;
            }
            long len = b.length[i];
            BufferRegistry.Buffer lb = registry.find(b.local[i], len);
            boolean spans = false;
            if (lb == null && localCoveredFrom(b.local[i], len) == len) {
                lb = registry.find(b.local[i], 1); // adjacent buffers: for a transport that spans them
                spans = true;
            }
            if (lb == null) {
                LOG.warn("transfer of {} bytes from local 0x{}: not inside registered memory", len,
                        Long.toHexString(b.local[i]));
                b.finish(i, TaskBatch.FAILED);
                uniform = false;
                continue;
            }
            SegmentDescriptor.Buffer rb = p.buffer(b.remote[i], len);
            if (rb == null && !refreshed && p.coveredFrom(b.remote[i], len) != len) {
                refreshed = true;
                p.refresh();
                rb = p.buffer(b.remote[i], len);
            }
            if (rb == null && p.coveredFrom(b.remote[i], len) == len) {
                rb = p.buffer(b.remote[i], 1);
                spans = true;
            }
            if (rb == null) {
                LOG.warn("transfer of {} bytes at 0x{} of {}: not inside the peer's registered buffers", len,
                        Long.toHexString(b.remote[i]), p.name());
                b.finish(i, TaskBatch.FAILED);
                uniform = false;
                continue;
            }
            if (lb != lastBuffer) {
                lastBuffer = lb;
                lastLocal = LocalBuffer.of(lb.address(), lb.length(), lb.location());
            }
            LocalBuffer local = lastLocal;
            int t;
            if (lastChoice >= 0 && rb == lastRemote && local == lastLocal && spans == lastSpans) {
                t = lastChoice; // the same pair of buffers as the task before: the same transport
            } else {
                t = choose(p, local, rb, 0, spans);
                lastRemote = rb;
                lastSpans = spans;
                lastChoice = t;
            }
            if (t < 0) {
                if (unroutable.incrementAndGet() <= 10) {
                    LOG.warn("transfer of {} bytes to {}: no installed transport reaches its buffer at 0x{} "
                            + "from local {} memory", len, p.name(), Long.toHexString(rb.addr()), local.location());
                }
                b.finish(i, TaskBatch.FAILED);
                uniform = false;
                continue;
            }
            b.via[i] = (byte) t;
            routedBytes[t].addAndGet(len);
            lbs[i] = local;
            b.peer[i] = p;
            kept++;
            if (first < 0) {
                first = t;
            } else if (first != t) {
                uniform = false;
            }
        }
        if (kept == 0) {
            return;
        }
        if (uniform) { // the common case: one transport for all of them, nothing dropped
            transports[first].submit(p, new Slices(b, first, from, n, idx == null ? null : idx));
            return;
        }
        for (int t = 0; t < transports.length; t++) {
            int m = 0;
            for (int k = 0; k < n; k++) {
                int i = idx == null ? from + k : idx[k];
                if (lbs[i] != null && b.via[i] == t) {
                    m++;
                }
            }
            if (m == 0) {
                continue;
            }
            int[] tasks = new int[m];
            int j = 0;
            for (int k = 0; k < n; k++) {
                int i = idx == null ? from + k : idx[k];
                if (lbs[i] != null && b.via[i] == t) {
                    tasks[j++] = i;
                }
            }
            transports[t].submit(p, new Slices(b, t, 0, m, tasks));
        }
    }

    /** The first transport at or after {@code start} that can move between {@code local} and {@code remote}; -1 if none. */
    private int choose(CorePeer p, LocalBuffer local, SegmentDescriptor.Buffer remote, int start, boolean spans) {
        MemoryKind remoteKind = MemoryKind.ofLocation(remote.name());
        for (int t = start; t < transports.length; t++) {
            TransportCapabilities c = caps[t];
            if (p.unreachableOver(t) || !c.moves(local.kind(), remoteKind) || !c.mooncakeWire() && !p.isMooncake4j()
                    || spans && !c.spansBuffers()) {
                continue;
            }
            if (transports[t].canTransfer(p, local, remote)) {
                return t;
            }
        }
        return -1;
    }

    /**
     * Moves task {@code i}, failed by transport {@code from} with a retryable {@code failure}, to
     * the next capable transport; false when there is none (the caller then fails the task). A
     * repeated report for a task that already moved on is absorbed (true).
     */
    boolean fallBack(TaskBatch b, CorePeer p, int i, int from, LocalBuffer local, SliceFailure failure, String why) {
        int next;
        synchronized (b) {
            if (b.via[i] != from || b.isTerminal(i)) {
                return true; // a late duplicate: the task already moved on or ended
            }
            if (failure == SliceFailure.UNREACHABLE) {
                p.markUnreachable(from);
            }
            SegmentDescriptor.Buffer rb = p.buffer(b.remote[i], b.length[i]);
            next = rb == null ? -1 : choose(p, local, rb, from + 1, false);
            if (next < 0) {
                return false;
            }
            b.via[i] = (byte) next;
        }
        fallbacks.incrementAndGet();
        routedBytes[next].addAndGet(b.length[i]);
        if (p.fallbackLogged.add(from)) {
            LOG.warn("{} could not move a slice to {} ({}: {}); it and later ones go over {} "
                    + "(logged once per peer and transport)", transports[from].name(), p.name(),
                    failure.name().toLowerCase(java.util.Locale.ROOT), why, transports[next].name());
        }
        transports[next].submit(p, new Slices(b, next, i, 1, null)); // b.localBuf[i] is still local
        return true;
    }

    /** Bytes from {@code addr} (at most {@code len}) that adjacent registered buffers cover without a gap. */
    private long localCoveredFrom(long addr, long len) {
        long done = 0;
        while (done < len) {
            BufferRegistry.Buffer b = registry.find(addr + done, 1);
            if (b == null) {
                break;
            }
            done += Math.min(len - done, b.address() + b.length() - (addr + done));
        }
        return done;
    }

    /** A transfer to the own segment: both ranges inside registered memory, then one copy. */
    boolean copyLocal(TaskBatch b, int i) {
        long len = b.length[i];
        boolean write = b.opcode[i] == WRITE;
        long src = write ? b.local[i] : b.remote[i];
        long dst = write ? b.remote[i] : b.local[i];
        var lock = localCopies.readLock();
        lock.lock();
        try {
            BufferRegistry.Buffer sb = registry.find(src, len);
            BufferRegistry.Buffer db = registry.find(dst, len);
            if (sb == null || db == null) {
                LOG.warn("local transfer of {} bytes 0x{} -> 0x{}: outside registered memory", len,
                        Long.toHexString(src), Long.toHexString(dst));
                return false;
            }
            LocalBuffer s = LocalBuffer.of(sb.address(), sb.length(), sb.location());
            LocalBuffer d = LocalBuffer.of(db.address(), db.length(), db.location());
            if (s.kind() == MemoryKind.HOST && d.kind() == MemoryKind.HOST) {
                MemorySegment.copy(ALL, src, ALL, dst, len);
                return true;
            }
            for (Transport t : transports) {
                int rc = t.copyLocal(src, s, dst, d, len);
                if (rc != Transport.COPY_UNSUPPORTED) {
                    return rc == Transport.COPIED;
                }
            }
            LOG.warn("local transfer of {} bytes {} -> {}: no installed transport copies device memory", len,
                    s.location(), d.location());
            return false;
        } finally {
            lock.unlock();
        }
    }

    /** The installed transports, in order. */
    Transport[] transports() {
        return Arrays.copyOf(transports, transports.length);
    }
}
