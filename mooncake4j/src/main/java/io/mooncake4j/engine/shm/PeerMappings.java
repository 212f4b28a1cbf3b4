package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.internal.sys.SharedMemory;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One peer's buffers as this process reaches them: each advertised memfd buffer mapped once
 * ({@code /proc/<pid>/fd/<n>}, {@code MAP_SHARED}, its own shared arena) and kept until
 * {@link #close}; whether {@code process_vm_*} reaches the peer's other host buffers (probed once).
 * Built for one descriptor: the transport replaces it when the peer's descriptor changes.
 *
 * <p>Thread-safe: lookups are lock-free, mappings are made under the monitor; {@link #close}
 * closes every arena, after which a copy in flight fails with {@link IllegalStateException} (the
 * transport turns it into a retryable slice failure) rather than touching unmapped memory.
 */
final class PeerMappings implements AutoCloseable {

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(PeerMappings.class);

    /**
     * A mapped remote buffer, or why it could not be mapped.
     *
     * @param buffer  the peer's descriptor entry
     * @param memory  the mapping (null when refused)
     * @param arena   what closes the mapping (null when refused)
     * @param refusal why it was not mapped (null when mapped)
     */
    record Mapping(SegmentDescriptor.Buffer buffer, MemorySegment memory, Arena arena, String refusal) {
        boolean usable() {
            return memory != null;
        }
    }

    private final SegmentDescriptor descriptor;
    private final ShmAdvert.Peer peer;
    private final Map<Long, Mapping> mappings = new ConcurrentHashMap<>();
    private volatile Boolean vmReachable;
    private volatile boolean closed;

    PeerMappings(SegmentDescriptor descriptor, ShmAdvert.Peer peer) {
        this.descriptor = descriptor;
        this.peer = peer;
    }

    SegmentDescriptor descriptor() {
        return descriptor;
    }

    int pid() {
        return peer.pid();
    }

    /** The mapping of {@code b} (made on first use), or a refused one with the reason. */
    Mapping mapping(SegmentDescriptor.Buffer b, ShmAdvert.Buffer advert) {
        Mapping m = mappings.get(b.addr());
        if (m != null) {
            return m;
        }
        synchronized (this) { // rare: once per remote buffer
            if (closed) {
                return refused(b, "peer mappings closed");
            }
            return mappings.computeIfAbsent(b.addr(), a -> map(b, advert));
        }
    }

    private Mapping map(SegmentDescriptor.Buffer b, ShmAdvert.Buffer advert) {
        Path fd = Path.of("/proc", Integer.toString(peer.pid()), "fd", Integer.toString(advert.fd()));
        String expected = "/memfd:" + advert.memfd() + " (deleted)";
        try {
            String target = Files.readSymbolicLink(fd).toString();
            if (!target.equals(expected)) { // the fd was closed and its number reused, or a wrong advert
                return refused(b, String.format(Locale.ROOT, "%s links to '%s', not '%s'", fd, target, expected));
            }
            try (FileChannel ch = FileChannel.open(fd, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                long end = Math.addExact(advert.offset(), b.length());
                if (ch.size() < end) { // mapping past the end would grow the peer's file
                    return refused(b, String.format(Locale.ROOT, "%s holds %d B, the buffer needs %d", fd,
                            ch.size(), end));
                }
                Arena arena = Arena.ofShared();
                try {
                    MemorySegment seg = ch.map(FileChannel.MapMode.READ_WRITE, advert.offset(), b.length(), arena);
                    prefault(seg);
                    return new Mapping(b, seg, arena, null);
                } catch (IOException | RuntimeException e) {
                    arena.close();
                    throw e;
                }
            }
        } catch (IOException | RuntimeException e) { // EACCES (other user, ptrace policy), ENOENT (peer gone)
            return refused(b, "cannot map " + fd + ": " + e);
        }
    }

    /**
     * Faults the mapping's pages in once, now, so that slices do not each pay minor faults on their
     * first pass: {@code MADV_POPULATE_WRITE}, or a read of one byte per page where the kernel lacks
     * it (a read fault of a shared writable mapping installs a writable entry). Bytes are unchanged.
     */
    private static void prefault(MemorySegment seg) {
        long pageStart = seg.address() & ~4095L;
        long len = seg.address() + seg.byteSize() - pageStart;
        if (SharedMemory.populateWrite(pageStart, len)) {
            return;
        }
        long first = pageStart == seg.address() ? 0 : 4096 - (seg.address() - pageStart);
        long sink = 0;
        for (long off = first; off < seg.byteSize(); off += 4096) {
            sink += seg.get(java.lang.foreign.ValueLayout.JAVA_BYTE, off);
        }
        if (sink == Long.MIN_VALUE) { // keeps the reads
            LOG.trace("prefault sink {}", sink);
        }
    }

    private static Mapping refused(SegmentDescriptor.Buffer b, String why) {
        return new Mapping(b, null, null, why);
    }

    /** Whether {@code process_vm_readv} reaches the peer (probed once on one byte of {@code b}). */
    boolean vmReachable(SegmentDescriptor.Buffer b) {
        Boolean r = vmReachable;
        if (r == null) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment one = a.allocate(1);
                SharedMemory.processVmCopy(false, peer.pid(), one.address(), b.addr(), 1);
                r = Boolean.TRUE;
            } catch (SharedMemory.SysException e) {
                r = Boolean.FALSE;
            }
            vmReachable = r;
        }
        return r;
    }

    /** Buffers mapped now (tests, diagnostics). */
    int mappedCount() {
        return (int) mappings.values().stream().filter(Mapping::usable).count();
    }

    /** Unmaps every buffer. Idempotent. */
    @Override
    public synchronized void close() {
        closed = true;
        for (Mapping m : mappings.values()) {
            if (m.arena() != null) {
                m.arena().close();
            }
        }
        mappings.clear();
    }
}
