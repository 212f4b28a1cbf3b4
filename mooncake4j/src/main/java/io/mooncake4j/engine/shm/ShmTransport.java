package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.DescriptorContribution;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;
import io.mooncake4j.engine.spi.Transport;
import io.mooncake4j.engine.spi.TransportCapabilities;
import io.mooncake4j.engine.spi.TransportContext;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.internal.sys.SharedMemory;
import io.mooncake4j.memory.ShareableMemory;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code shm} transport: host memory between two processes on one machine, after Mooncake
 * TENT's shm transport. A peer buffer that lives in a memfd ({@link ShareableMemory}) is mapped once
 * through {@code /proc/<pid>/fd/<n>} and each slice is one {@link MemorySegment#copy}; another host
 * buffer of a same-machine peer is reached with {@code process_vm_writev/readv}; anything else
 * (another machine or PID namespace, a C++ peer, GPU memory, a mapping the kernel refuses) is not
 * offered to shm ({@link #canTransfer} is false) and the core picks the next transport. Only the
 * remote buffer must be shareable: the local one is in this process already.
 *
 * <p>Threads: slices are copied on the submitting thread (a memcpy, no I/O); mappings are made on
 * first use by whichever thread asks and dropped in {@link #forget} / {@link #uninstall}. The
 * registration map is replaced under the core's registration lock and read lock-free.
 */
public final class ShmTransport implements Transport {

    private static final Logger LOG = LoggerFactory.getLogger(ShmTransport.class);
    private static final TransportCapabilities CAPABILITIES = new TransportCapabilities(Set.of(MemoryKind.HOST),
            Set.of(MemoryKind.HOST), true, false, false);

    private final MachineIdentity identity;
    private final long pid = ProcessHandle.current().pid();
    // registered local buffers (base → advert), replaced on change
    private volatile Map<Long, Map<String, Object>> adverts = Map.of();
    private final Map<Long, PeerMappings> peers = new ConcurrentHashMap<>();
    private final Set<Long> refusalLogged = ConcurrentHashMap.newKeySet();
    private volatile boolean installed;

    /** A transport for this process's machine identity. */
    public ShmTransport() {
        this(MachineIdentity.local());
    }

    /** A transport that believes it runs on {@code identity} (tests: a different machine). */
    ShmTransport(MachineIdentity identity) {
        this.identity = identity;
    }

    /** The transport's name ({@code MC_TRANSPORTS}, logs). */
    public static final String NAME = "shm";

    /** Its declaration: host memory on this machine; after cuda-ipc, before rdma. */
    public static final TransportDeclaration DECLARATION = new TransportDeclaration(NAME,
            Set.of(MemoryKind.HOST), 20, true, false);

    /** The factory of shm transports for this process's machine identity. */
    public static TransportFactory factory() {
        return new TransportFactory(DECLARATION, ShmTransport::new);
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public TransportCapabilities capabilities() {
        return CAPABILITIES;
    }

    @Override
    public void install(TransportContext context) throws TransportException {
        if (!SharedMemory.available()) {
            throw new TransportException("shm transport unavailable: " + SharedMemory.unavailableReason()
                    + "; run with --enable-native-access=ALL-UNNAMED on Linux, or use protocol tcp");
        }
        if (identity == null) {
            throw new TransportException("shm transport unavailable: /proc/sys/kernel/random/boot_id or "
                    + "/proc/self/ns/pid unreadable (no procfs?); use protocol tcp");
        }
        installed = true;
        if (context != null) {
            registerBuffers(context.registeredBuffers());
        }
    }

    @Override
    public void uninstall() {
        installed = false;
        for (Long id : List.copyOf(peers.keySet())) {
            PeerMappings m = peers.remove(id);
            if (m != null) {
                m.close();
            }
        }
        adverts = Map.of();
    }

    @Override
    public synchronized int registerBuffers(List<LocalBuffer> buffers) {
        Map<Long, Map<String, Object>> next = new ConcurrentHashMap<>(adverts);
        for (LocalBuffer b : buffers) {
            if (b.kind() != MemoryKind.HOST) {
                continue; // GPU memory is not shm's
            }
            var h = ShareableMemory.find(b.address(), b.length());
            next.put(b.address(), h.isPresent()
                    ? ShmAdvert.memfdBuffer(h.get().fd(), b.address() - h.get().address(), h.get().name())
                    : ShmAdvert.vmBuffer());
        }
        adverts = Map.copyOf(next);
        return ErrorCodes.OK;
    }

    @Override
    public synchronized void unregisterBuffers(List<LocalBuffer> buffers) {
        Map<Long, Map<String, Object>> next = new ConcurrentHashMap<>(adverts);
        for (LocalBuffer b : buffers) {
            next.remove(b.address());
        }
        adverts = Map.copyOf(next);
    }

    @Override
    public void describe(DescriptorContribution out) {
        out.segmentExtension(ShmAdvert.KEY, ShmAdvert.peer(identity, pid));
        for (Map.Entry<Long, Map<String, Object>> e : adverts.entrySet()) {
            out.bufferExtension(e.getKey(), ShmAdvert.KEY, e.getValue());
        }
    }

    @Override
    public boolean canTransfer(RemoteSegment peer, LocalBuffer local, SegmentDescriptor.Buffer remote) {
        if (!installed || local.kind() != MemoryKind.HOST || remote == null) {
            return false;
        }
        ShmAdvert.Buffer advert = ShmAdvert.bufferOf(remote);
        if (advert == null) {
            return false;
        }
        PeerMappings m = mappings(peer);
        if (m == null) {
            return false;
        }
        if (advert.mappable()) {
            PeerMappings.Mapping mapping = m.mapping(remote, advert);
            if (!mapping.usable() && refusalLogged.add(peer.id())) {
                LOG.info("shm: {} buffer at 0x{} not mapped, using the next transport: {}", peer.name(),
                        Long.toHexString(remote.addr()), mapping.refusal());
            }
            return mapping.usable();
        }
        return m.vmReachable(remote);
    }

    /** This peer's mappings for its current descriptor; null when the peer is not on this machine. */
    private PeerMappings mappings(RemoteSegment peer) {
        SegmentDescriptor d = peer.descriptor();
        PeerMappings m = peers.get(peer.id());
        if (m != null && m.descriptor() == d) {
            return m;
        }
        ShmAdvert.Peer p = ShmAdvert.peerOf(d);
        if (p == null || !p.machine().equals(identity)) {
            return null;
        }
        PeerMappings fresh = new PeerMappings(d, p);
        PeerMappings old;
        synchronized (peers) {
            m = peers.get(peer.id());
            if (m != null && m.descriptor() == d) {
                return m;
            }
            old = peers.put(peer.id(), fresh);
        }
        if (old != null) {
            old.close(); // the descriptor changed: buffers may have gone
        }
        return fresh;
    }

    @Override
    public void submit(RemoteSegment peer, SliceGroup slices) {
        PeerMappings m = mappings(peer);
        for (int i = 0; i < slices.size(); i++) {
            if (slices.aborted()) {
                slices.fail(i, SliceFailure.TIMEOUT, "batch aborted");
                continue;
            }
            if (m == null) {
                slices.fail(i, SliceFailure.UNREACHABLE, "peer " + peer.name() + " is not on this machine");
                continue;
            }
            copy(peer, m, slices, i);
        }
    }

    private void copy(RemoteSegment peer, PeerMappings m, SliceGroup s, int i) {
        long remote = s.remote(i);
        long len = s.length(i);
        SegmentDescriptor.Buffer rb = peer.buffer(remote, len);
        ShmAdvert.Buffer advert = rb == null ? null : ShmAdvert.bufferOf(rb);
        if (advert == null) {
            s.fail(i, SliceFailure.UNREACHABLE, "remote range not advertised for shm");
            return;
        }
        boolean write = s.isWrite(i);
        try {
            if (advert.mappable()) {
                PeerMappings.Mapping mapping = m.mapping(rb, advert);
                if (!mapping.usable()) {
                    s.fail(i, SliceFailure.UNREACHABLE, mapping.refusal());
                    return;
                }
                MemorySegment local = MemorySegment.ofAddress(s.local(i)).reinterpret(len);
                long off = remote - rb.addr();
                if (write) {
                    MemorySegment.copy(local, 0, mapping.memory(), off, len);
                } else {
                    MemorySegment.copy(mapping.memory(), off, local, 0, len);
                }
            } else {
                SharedMemory.processVmCopy(write, m.pid(), s.local(i), remote, len);
            }
            s.complete(i);
        } catch (IllegalStateException e) { // the mapping was closed under us (descriptor refresh, uninstall)
            s.fail(i, SliceFailure.TRANSIENT, "shm mapping closed during the copy");
        } catch (SharedMemory.SysException e) {
            s.fail(i, e.errno() == 1 || e.errno() == 3 ? SliceFailure.UNREACHABLE : SliceFailure.TRANSIENT,
                    e.getMessage());
        }
    }

    @Override
    public void forget(RemoteSegment peer) {
        PeerMappings m = peers.remove(peer.id());
        if (m != null) {
            m.close();
        }
        refusalLogged.remove(peer.id());
    }

    /** Buffers of {@code peerId} mapped now (tests). */
    int mappedBuffers(long peerId) {
        PeerMappings m = peers.get(peerId);
        return m == null ? 0 : m.mappedCount();
    }
}
