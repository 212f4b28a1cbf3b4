package io.mooncake4j.engine.core;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.RemoteSegment;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A peer segment the core opened: its cached descriptor (replaced by {@link PeerTable#refresh})
 * and, per installed transport (by index in the core's order), whether that transport was found
 * unable to reach it. Thread-safe: the descriptor is published through a volatile field.
 */
final class CorePeer implements RemoteSegment {

    private static final String MACHINE_KEY = SegmentDescriptor.EXTENSION_PREFIX + "machine";

    private final long id;
    /** The resolved identity aliases share. */
    final String key;
    private final PeerTable table;
    private volatile SegmentDescriptor descriptor;
    /** Bit t set: transport t failed this peer with UNREACHABLE since the last refresh. */
    private final java.util.concurrent.atomic.AtomicLong unreachable = new java.util.concurrent.atomic.AtomicLong();
    /**
     * Its last connection or refresh found this engine's own segment there ({@link #foundOwnEngine}); cleared
     * by a refresh that finds another engine.
     */
    private volatile boolean ownEngine;
    /** Transports whose first fallback for this peer was logged. */
    final Set<Integer> fallbackLogged = ConcurrentHashMap.newKeySet();

    CorePeer(long id, String key, SegmentDescriptor descriptor, PeerTable table) {
        this.id = id;
        this.key = key;
        this.descriptor = descriptor;
        this.table = table;
    }

    @Override
    public long id() {
        return id;
    }

    @Override
    public String name() {
        return descriptor.name();
    }

    @Override
    public SegmentDescriptor descriptor() {
        return descriptor;
    }

    void replace(SegmentDescriptor d, boolean endpointsChanged) {
        descriptor = d;
        ownEngine = false;
        if (endpointsChanged) {
            unreachable.set(0);
        }
    }

    @Override
    public String machineId() {
        Object m = descriptor.extensions().get(MACHINE_KEY);
        return m instanceof String s ? s : null;
    }

    @Override
    public boolean sameMachine() {
        String m = machineId();
        return m != null && m.equals(io.mooncake4j.engine.spi.MachineIdentity.local());
    }

    @Override
    public boolean isMooncake4j() {
        return !descriptor.extensions().isEmpty();
    }

    @Override
    public SegmentDescriptor.Buffer buffer(long addr, long len) {
        List<SegmentDescriptor.Buffer> bufs = descriptor.buffers();
        for (int i = 0, n = bufs.size(); i < n; i++) { // indexed: no iterator per slice
            SegmentDescriptor.Buffer b = bufs.get(i);
            if (b.contains(addr, len)) {
                return b;
            }
        }
        return null;
    }

    /** Bytes from {@code addr} (at most {@code len}) that adjacent advertised buffers cover without a gap. */
    long coveredFrom(long addr, long len) {
        long done = 0;
        while (done < len) {
            SegmentDescriptor.Buffer b = buffer(addr + done, 1);
            if (b == null) {
                break;
            }
            done += Math.min(len - done, b.addr() + b.length() - (addr + done));
        }
        return done;
    }

    @Override
    public boolean refresh() {
        return table.refresh(this);
    }

    @Override
    public void foundOwnEngine() {
        ownEngine = true;
    }

    @Override
    public boolean ownEngineFound() {
        return ownEngine;
    }

    boolean unreachableOver(int transport) {
        return (unreachable.get() >>> transport & 1) != 0;
    }

    void markUnreachable(int transport) {
        unreachable.getAndUpdate(u -> u | 1L << transport);
    }

    @Override
    public String toString() {
        return descriptor.name();
    }
}
