package io.mooncake4j.engine.cudaipc;

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code cuda-ipc} transport: GPU memory to GPU memory between two processes on one machine
 * over CUDA IPC handles (Mooncake TENT's intra-node NVLink idea). Registering a {@code cuda:N}
 * buffer exports the IPC handle of the allocation it lies in and advertises handle, offset and GPU
 * ({@link CudaIpcAdvert}); a same-machine peer opens each remote allocation once
 * ({@link PeerHandles}, at most {@value #DEFAULT_MAX_HANDLES} per peer unless
 * {@value #MAX_HANDLES_ENV} says otherwise) and each slice is one device-to-device copy
 * ({@link IpcDriver#copy}) on the local buffer's GPU.
 *
 * <p>Offered ({@link #canTransfer}) only when the local buffer is GPU memory, the peer is a
 * mooncake4j engine on the same machine in another process, the remote buffer advertises a
 * well-formed handle, that handle was not refused before and the cap leaves room. Anything else
 * (host memory, another machine, a C++ peer, memory that could not be exported) goes to the next
 * transport (rdma, tcp). A handle the driver refuses to open (another container, no peer access)
 * fails the slice as {@link SliceFailure#UNREACHABLE}: the core moves it to the next transport,
 * logs that once per peer and stops offering cuda-ipc to that peer until its descriptor changes.
 *
 * <p>The capabilities accept host as the remote kind too: a TCP-shaped descriptor names buffers by
 * segment, not location, so the remote kind is only known from the advert, which
 * {@link #canTransfer} checks.
 *
 * <p>Threads: copies run on the submitting thread (the driver call returns when the bytes
 * arrived); handles are opened on first use by whichever thread asks and closed in
 * {@link #forget} / {@link #uninstall} once no copy uses them. The advert map is replaced under
 * the core's registration lock and read lock-free.
 */
public final class CudaIpcTransport implements Transport {

    /** The transport's name ({@code MC_TRANSPORTS}, logs, {@code bytesByTransport}). */
    public static final String NAME = "cuda-ipc";

    /** Its declaration: GPU memory on this machine (to or from host or GPU memory); first in the order; only "auto" installs it. */
    public static final TransportDeclaration DECLARATION = new TransportDeclaration(NAME,
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), 10, false, false);
    /** Caps the IPC handles opened per peer. */
    public static final String MAX_HANDLES_ENV = "MOONCAKE4J_CUDA_IPC_MAX_HANDLES";
    /** The default of {@value #MAX_HANDLES_ENV}. */
    public static final int DEFAULT_MAX_HANDLES = 256;

    private static final Logger LOG = LoggerFactory.getLogger(CudaIpcTransport.class);
    private static final TransportCapabilities CAPABILITIES = new TransportCapabilities(Set.of(MemoryKind.CUDA),
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), true, false, false);

    private final IpcDriver driver;
    private final long pid = ProcessHandle.current().pid();
    private volatile Map<Long, Map<String, Object>> adverts = Map.of();
    /** Local allocation base → its handle and the registered buffers inside it (registration lock). */
    private final Map<Long, Exported> exported = new HashMap<>();
    private final Map<Integer, IpcDriver.DeviceId> devices = new ConcurrentHashMap<>();
    private final Map<Long, PeerHandles> peers = new ConcurrentHashMap<>();
    private final Set<Long> malformedLogged = ConcurrentHashMap.newKeySet();
    private final CudaIpcConfig config;
    private volatile int cap;
    private volatile String machine = io.mooncake4j.engine.spi.MachineIdentity.local();
    private volatile boolean installed;

    /** A local allocation exported once: every buffer inside it advertises the same handle (one open per peer). */
    private static final class Exported {
        final byte[] handle;
        final Set<Long> buffers = new java.util.HashSet<>();

        Exported(byte[] handle) {
            this.handle = handle;
        }
    }

    /** The transport over the CUDA driver of this process, with the default settings. */
    public CudaIpcTransport() {
        this(new CudaDriverIpc(), CudaIpcConfig.DEFAULTS);
    }

    /**
     * The transport over {@code driver} (tests pass a fake), with the default settings.
     *
     * @param driver the CUDA calls
     */
    public CudaIpcTransport(IpcDriver driver) {
        this(driver, CudaIpcConfig.DEFAULTS);
    }

    /**
     * The transport over {@code driver} with {@code config}.
     *
     * @param driver the CUDA calls
     * @param config the settings (parsed from the engine's environment snapshot)
     */
    public CudaIpcTransport(IpcDriver driver, CudaIpcConfig config) {
        this.driver = driver;
        this.config = java.util.Objects.requireNonNull(config, "config");
        this.cap = config.maxHandles();
    }

    /**
     * Whether the core should try cuda-ipc: null (try it) where an NVIDIA driver is present, else
     * why not, found without loading CUDA ({@code /dev/nvidiactl}, {@code /proc/driver/nvidia}), so
     * that engines on machines without a GPU pay nothing.
     *
     * @param protocol     the protocol passed to initialize (unused: cuda-ipc is never required)
     * @param deviceFilter the device filter (unused)
     * @return null to try it, else why not
     */
    public static String autoPrecheck(String protocol, String deviceFilter) {
        return Files.exists(Path.of("/dev/nvidiactl")) || Files.exists(Path.of("/proc/driver/nvidia")) ? null
                : "no NVIDIA driver here (/dev/nvidiactl and /proc/driver/nvidia absent)";
    }

    /** The factory of cuda-ipc transports over the CUDA driver with the default settings (installed only where an NVIDIA driver is). */
    public static TransportFactory factory() {
        return factory(CudaIpcConfig.DEFAULTS);
    }

    /** The factory of cuda-ipc transports over the CUDA driver with {@code config} (installed only where an NVIDIA driver is). */
    public static TransportFactory factory(CudaIpcConfig config) {
        return new TransportFactory(DECLARATION, () -> new CudaIpcTransport(new CudaDriverIpc(), config),
                CudaIpcTransport::autoPrecheck);
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
        String why = driver.unavailability();
        if (why != null) {
            throw new TransportException("cuda-ipc transport unavailable: " + why
                    + "; GPU memory goes over rdma or tcp instead");
        }
        if (context != null) {
            if (config.problem() != null) {
                throw new TransportException(config.problem());
            }
            if (context.machineId() != null) {
                machine = context.machineId();
            }
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
            PeerHandles h = peers.remove(id);
            if (h != null) {
                h.close();
            }
        }
        synchronized (this) {
            adverts = Map.of();
            exported.clear();
        }
        driver.shutdown();
    }

    @Override
    public synchronized int registerBuffers(List<LocalBuffer> buffers) {
        Map<Long, Map<String, Object>> next = new HashMap<>(adverts);
        int unshared = 0;
        String firstReason = null;
        for (LocalBuffer b : buffers) {
            if (b.kind() != MemoryKind.CUDA) {
                continue;
            }
            int dev = deviceIndex(b.location());
            try {
                if (dev < 0) {
                    throw new IpcDriver.Failure("location " + b.location(), -1, "not cuda:<n>");
                }
                IpcDriver.Range r = driver.allocation(dev, b.address());
                long off = b.address() - r.base();
                if (off < 0 || off > r.bytes() - b.length()) {
                    throw new IpcDriver.Failure("allocation of 0x" + Long.toHexString(b.address()), -1, String.format(
                            Locale.ROOT, "the buffer of %d B spans allocations (allocation 0x%x, %d B)", b.length(),
                            r.base(), r.bytes()));
                }
                Exported ex = exported.get(r.base());
                if (ex == null) {
                    ex = new Exported(driver.exportHandle(dev, r.base()));
                    exported.put(r.base(), ex);
                }
                byte[] handle = ex.handle;
                IpcDriver.DeviceId id = devices.get(dev);
                if (id == null) {
                    id = driver.device(dev);
                    devices.put(dev, id);
                }
                next.put(b.address(), CudaIpcAdvert.buffer(handle, off, r.bytes(), id));
                ex.buffers.add(b.address());
            } catch (IpcDriver.Failure e) { // not a refusal: the buffer goes over the next transport
                if (unshared++ == 0) {
                    firstReason = String.format(Locale.ROOT, "0x%x (%s): %s", b.address(), b.location(), e.getMessage());
                }
            }
        }
        if (unshared > 0) { // one line per registration call, however many buffers
            LOG.info("cuda-ipc: {} GPU buffer(s) not shared over CUDA IPC, other transports move them; first {}",
                    unshared, firstReason);
        }
        adverts = Map.copyOf(next);
        return ErrorCodes.OK;
    }

    @Override
    public synchronized void unregisterBuffers(List<LocalBuffer> buffers) {
        Map<Long, Map<String, Object>> next = new HashMap<>(adverts);
        for (LocalBuffer b : buffers) {
            next.remove(b.address());
        }
        // an allocation with no registered buffer left may be freed, and its base reused
        exported.values().removeIf(ex -> {
            ex.buffers.removeIf(a -> !next.containsKey(a));
            return ex.buffers.isEmpty();
        });
        adverts = Map.copyOf(next);
    }

    @Override
    public void describe(DescriptorContribution out) {
        Map<Long, Map<String, Object>> a = adverts;
        if (a.isEmpty()) {
            return; // nothing to open: peers are not offered cuda-ipc at all
        }
        out.segmentExtension(CudaIpcAdvert.KEY, CudaIpcAdvert.peer(machine, driver.processToken(), pid));
        for (Map.Entry<Long, Map<String, Object>> e : a.entrySet()) {
            out.bufferExtension(e.getKey(), CudaIpcAdvert.KEY, e.getValue());
        }
    }

    @Override
    public boolean reaches(RemoteSegment peer) {
        return installed && handles(peer) != null;
    }

    @Override
    public boolean canTransfer(RemoteSegment peer, LocalBuffer local, SegmentDescriptor.Buffer remote) {
        if (!installed || local.kind() != MemoryKind.CUDA || remote == null) {
            return false;
        }
        int dev = deviceIndex(local.location());
        PeerHandles h = dev < 0 ? null : handles(peer);
        if (h == null) {
            return false;
        }
        CudaIpcAdvert.Buffer advert = advert(peer, h, remote);
        return advert != null && h.mayLease(advert, dev);
    }

    /** The remote entry's advert; null (a malformed one logged once per peer) when there is none. */
    private CudaIpcAdvert.Buffer advert(RemoteSegment peer, PeerHandles h, SegmentDescriptor.Buffer remote) {
        CudaIpcAdvert.Parsed p = h.parsed(remote);
        if (p == null) {
            return null;
        }
        if (p.error() != null) {
            if (malformedLogged.add(peer.id())) {
                LOG.warn("cuda-ipc: {} advertises its buffer at 0x{} badly ({}); its GPU buffers go over the next "
                        + "transport (logged once per peer)", peer.name(), Long.toHexString(remote.addr()), p.error());
            }
            return null;
        }
        return p.buffer();
    }

    /**
     * This peer's handles for its current descriptor; null when the peer is not offered cuda-ipc
     * (not a mooncake4j engine on this machine, no advert, this very process).
     */
    private PeerHandles handles(RemoteSegment peer) {
        SegmentDescriptor d = peer.descriptor();
        PeerHandles h = peers.get(peer.id());
        if (h != null && h.descriptor() == d) {
            return h;
        }
        CudaIpcAdvert.Peer p = CudaIpcAdvert.peerOf(d);
        if (p == null || !p.machine().equals(machine) || p.process().equals(driver.processToken())) {
            return null; // no advert, another machine, or our own handles (a process cannot open those)
        }
        PeerHandles fresh = new PeerHandles(driver, d, peer.name(), cap);
        PeerHandles old;
        synchronized (peers) {
            h = peers.get(peer.id());
            if (h != null && h.descriptor() == d) {
                return h;
            }
            if (!installed) {
                return null;
            }
            old = peers.put(peer.id(), fresh);
        }
        if (old != null) {
            old.close(); // the descriptor changed: allocations may have gone
        }
        return fresh;
    }

    @Override
    public void submit(RemoteSegment peer, SliceGroup slices) {
        PeerHandles h = handles(peer);
        for (int i = 0; i < slices.size(); i++) {
            if (slices.aborted()) {
                slices.fail(i, SliceFailure.TIMEOUT, "batch aborted");
            } else if (h == null) {
                slices.fail(i, SliceFailure.UNREACHABLE, "peer " + peer.name()
                        + " advertises no cuda-ipc handles this process can open");
            } else {
                copy(peer, h, slices, i);
            }
        }
    }

    private void copy(RemoteSegment peer, PeerHandles h, SliceGroup s, int i) {
        long remote = s.remote(i);
        long len = s.length(i);
        int dev = deviceIndex(s.localBuffer(i).location());
        SegmentDescriptor.Buffer rb = peer.buffer(remote, len);
        CudaIpcAdvert.Buffer advert = rb == null ? null : advert(peer, h, rb);
        if (advert == null || dev < 0) {
            s.fail(i, SliceFailure.UNREACHABLE, "remote range not advertised for cuda-ipc");
            return;
        }
        PeerHandles.Opened o;
        try {
            o = h.lease(advert, dev);
        } catch (PeerHandles.Refusal r) {
            s.fail(i, r.unreachable ? SliceFailure.UNREACHABLE : SliceFailure.TRANSIENT, r.getMessage());
            return;
        }
        try {
            long mapped = o.mapped + advert.offset() + (remote - rb.addr());
            if (s.isWrite(i)) {
                driver.copy(dev, mapped, s.local(i), len);
            } else {
                driver.copy(dev, s.local(i), mapped, len);
            }
            s.complete(i);
        } catch (IpcDriver.Failure e) {
            s.fail(i, SliceFailure.TRANSIENT, e.getMessage());
        } finally {
            h.release(o);
        }
    }

    @Override
    public void forget(RemoteSegment peer) {
        PeerHandles h = peers.remove(peer.id());
        if (h != null) {
            h.close();
        }
        malformedLogged.remove(peer.id());
    }

    /** {@code N} of {@code cuda:N} ({@code cuda} alone: 0), -1 when malformed. */
    static int deviceIndex(String location) {
        if (location.length() == 4) {
            return 0;
        }
        if (location.length() < 6 || location.charAt(4) != ':') {
            return -1;
        }
        try {
            int n = Integer.parseInt(location.substring(5));
            return n >= 0 ? n : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** IPC handles of {@code peerId} open now (tests). */
    int openHandles(long peerId) {
        PeerHandles h = peers.get(peerId);
        return h == null ? 0 : h.openCount();
    }

    /** Buffers advertised now (tests). */
    int advertisedBuffers() {
        return adverts.size();
    }
}
