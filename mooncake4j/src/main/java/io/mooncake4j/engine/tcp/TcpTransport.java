package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry.Buffer;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.spi.DescriptorContribution;
import io.mooncake4j.engine.spi.EngineSettings;
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
import io.mooncake4j.engine.spi.TransportHost;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.MemoryLocation;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code tcp} transport: Mooncake's TCP transport wire (data port, v2 pipelined framing, v1 on
 * request) over {@link TcpConfig#lanesPerPeer()} persistent connections per peer ({@link Peer},
 * {@link Lane}), and the data port serving peers ({@link TcpDataServer}). It reaches any peer that
 * advertises a data port, C++ ones included, and host or GPU memory on both sides (GPU memory
 * through pinned bounce buffers, {@link DeviceStaging}).
 *
 * <ul>
 *   <li>Peers (lanes and their threads) unused for {@link TcpConfig#peerIdleTimeoutMs()} are closed
 *       and reopened on the next transfer; at most {@link TcpConfig#maxPeers()} are live, a new one
 *       closes the longest-unused idle one, or fails its transfer when all are busy.</li>
 *   <li>A peer whose connection died is re-fetched ({@link RemoteSegment#refresh}) before it is
 *       reopened, so a restarted peer is picked up; so is one whose last connection or refresh found
 *       this engine itself ({@link RemoteSegment#ownEngineFound}), which is then not written to.</li>
 *   <li>Its lanes end tasks on the core's batch directly ({@link SliceGroup#batch()}): the core puts
 *       tcp last in its order, so its failures are final.</li>
 * </ul>
 *
 * <p>Threads: {@code mooncake-target-*} (data port), {@code mooncake-initiator-*} (lanes and the
 * watchdog); all stop in {@link #uninstall}.
 */
public final class TcpTransport implements Transport {

    private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
    private static final AtomicInteger ENGINES = new AtomicInteger();
    private static final TransportCapabilities CAPABILITIES = new TransportCapabilities(
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), Set.of(MemoryKind.HOST, MemoryKind.CUDA), false, true, false);
    /** How long {@link #makeRoomForPeer} waits for a just-finished peer's lanes to settle. */
    private static final long MAKE_ROOM_SETTLE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);

    /** The lanes towards one peer segment. */
    private final class Link {
        final RemoteSegment segment;
        /** Written under the link's monitor, read lock-free by the watchdog and aborts. */
        private volatile Peer peer;

        Link(RemoteSegment segment) {
            this.segment = segment;
        }

        /**
         * The live peer, refreshing the descriptor first when the previous one died (not when it was
         * retired for idleness); null on failure or when {@link TcpConfig#maxPeers()} live peers are
         * busy.
         */
        synchronized Peer peer() {
            if (peer != null && !peer.isDead()) {
                return peer;
            }
            if (!installed) {
                return null;
            }
            if (peer != null) {
                Peer old = peer;
                peer = null;
                boolean retired = old.isRetired();
                old.close();
                if (!retired && !segment.refresh()) {
                    return null;
                }
            } else if (segment.ownEngineFound() && !segment.refresh()) {
                return null; // still this engine itself: its cached descriptor is older than that verdict
            }
            SegmentDescriptor d = segment.descriptor();
            if (d.tcpDataPort() <= 0) {
                return null;
            }
            if (!makeRoomForPeer(this)) {
                if (peerLimitHits.incrementAndGet() <= 10) {
                    LOG.warn("cannot open a connection to segment {}: {} peers are in use, none idle "
                            + "(MOONCAKE4J_TCP_MAX_PEERS); its transfers fail", d.name(), config.maxPeers());
                }
                return null;
            }
            peer = new Peer(segment, d, config, memory, engineSerial * 1000 + peerSerial.getAndIncrement(),
                    dataPort(), tag);
            return peer;
        }

        Peer current() {
            return peer;
        }

        synchronized void close() {
            if (peer != null) {
                peer.close();
                peer = null;
            }
        }
    }

    private final TcpConfig config;
    private final LocalMemory memory;
    private final DeviceStaging staging;
    private final int engineSerial = ENGINES.getAndIncrement();
    /** This engine's tag, sent in its request headers; its data server refuses requests that carry it. */
    private final long tag = TcpWire.newTag();
    private final AtomicInteger peerSerial = new AtomicInteger();
    private final Map<Long, Link> links = new ConcurrentHashMap<>();
    private final AtomicLong peerLimitHits = new AtomicLong();
    private final AtomicLong retiredPeers = new AtomicLong();
    private volatile TcpDataServer data;
    private volatile Thread watchdog;
    private volatile boolean installed;

    /**
     * A transport with explicit settings whose GPU memory ({@code cuda:N} buffers) is reached through
     * {@code deviceMemory}: staged through its pinned bounce buffers over the network, copied with its
     * queues for transfers to the own segment.
     */
    TcpTransport(TcpConfig config, DeviceMemory deviceMemory, StagingConfig staging) {
        this.config = Objects.requireNonNull(config, "config");
        this.staging = new DeviceStaging(Objects.requireNonNull(deviceMemory, "deviceMemory"), staging);
        this.memory = new LocalMemory(TimeUnit.MILLISECONDS.toNanos(config.unregisterWaitMs()), this.staging);
    }

    /** A transport with explicit settings; GPU memory through CUDA, staged per {@link TcpConfig#staging()}. */
    public TcpTransport(TcpConfig config) {
        this(config, io.mooncake4j.memory.cuda.CudaDeviceMemory.INSTANCE, config.staging());
    }

    /**
     * The engine settings that go with a TCP configuration (its handshake, transfer timeout and
     * segment cap), with the process environment snapshot for the rest ({@code MC_TRANSPORTS}).
     */
    public static EngineSettings engineSettings(TcpConfig c) {
        return new EngineSettings(c.handshake(), c.transferTimeoutMs(), c.maxSegments(),
                EngineSettings.processEnvironment());
    }

    /** The factory of tcp transports with these settings (GPU memory through CUDA, staged per the config). */
    public static TransportFactory factory(TcpConfig config) {
        return new TransportFactory(DECLARATION, () -> new TcpTransport(config));
    }

    /** The factory of tcp transports reaching GPU memory through {@code deviceMemory}. */
    public static TransportFactory factory(TcpConfig config, DeviceMemory deviceMemory) {
        return factory(config, deviceMemory, config.staging());
    }

    /** The factory of tcp transports with explicit staging settings (tests). */
    static TransportFactory factory(TcpConfig config, DeviceMemory deviceMemory, StagingConfig staging) {
        return new TransportFactory(DECLARATION, () -> new TcpTransport(config, deviceMemory, staging));
    }

    /**
     * The tcp transport installed in {@code engine} (for its monitoring getters), or null: the
     * engine is not initialised, has no tcp, or is not the engine core.
     */
    public static TcpTransport in(TransferEngine engine) {
        return engine instanceof TransportHost h && h.transport(NAME) instanceof TcpTransport t ? t : null;
    }

    /** The transport's name ({@code MC_TRANSPORTS}, logs). */
    public static final String NAME = "tcp";

    /** Its declaration: host and GPU memory (GPU memory staged through pinned host buffers); last in the order, and installed beside any requested transport. */
    public static final TransportDeclaration DECLARATION = new TransportDeclaration(NAME,
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), 90, true, true);

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
        try {
            data = TcpDataServer.start(config.dataListen(), memory, config.dataIdleTimeoutMs(),
                    config.maxDataConnections(), config.gatherWrites());
            data.ownTag = tag;
            if (config.gatherWrites() && GatherWriter.unavailableReason() != null) {
                LOG.info("TCP: gathering writes off ({}): one write per header run and per body",
                        GatherWriter.unavailableReason());
            }
        } catch (IOException e) {
            throw new TransportException("cannot bind the TCP data port: " + e.getMessage());
        }
        installed = true;
        List<LocalBuffer> already = context.registeredBuffers();
        if (!already.isEmpty() && registerBuffers(already) != 0) {
            uninstall();
            throw new TransportException("cannot register the buffers registered so far");
        }
        Thread w = Thread.ofPlatform().daemon(true).name("mooncake-initiator-watchdog-" + engineSerial)
                .unstarted(this::watchdogLoop);
        watchdog = w;
        w.start();
        LOG.info("TCP transport: data port {}, {} lanes per peer, window {}, protocol version 2", data.port(),
                config.lanesPerPeer(), config.window());
    }

    @Override
    public void uninstall() {
        installed = false;
        for (Link l : links.values()) {
            l.close();
        }
        Thread w = watchdog;
        if (w != null) {
            LockSupport.unpark(w);
            try {
                w.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        TcpDataServer d = data;
        if (d != null) {
            d.close();
        }
        staging.close();
    }

    // ------------------------------------------------------------------ memory

    @Override
    public int registerBuffers(List<LocalBuffer> buffers) {
        long[] a = new long[buffers.size()];
        long[] l = new long[a.length];
        String[] loc = new String[a.length];
        for (int i = 0; i < a.length; i++) {
            LocalBuffer b = buffers.get(i);
            if (MemoryLocation.isCuda(b.location())) {
                try {
                    staging.device.checkLocation(b.location());
                } catch (RuntimeException e) {
                    LOG.error("registerMemory(0x{}, {}): {}", Long.toHexString(b.address()), b.location(),
                            e.getMessage());
                    return ErrorCodes.DEVICE_NOT_FOUND;
                }
            }
            a[i] = b.address();
            l[i] = b.length();
            loc[i] = b.location();
        }
        return memory.register(a, l, loc);
    }

    @Override
    public void unregisterBuffers(List<LocalBuffer> buffers) {
        List<Long> present = new ArrayList<>(buffers.size());
        for (LocalBuffer b : buffers) {
            if (memory.registry.byBase(b.address()) != null) {
                present.add(b.address());
            }
        }
        long[] a = new long[present.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = present.get(i);
        }
        if (a.length > 0) {
            memory.unregister(a);
        }
    }

    @Override
    public String detectLocation(long address) {
        int dev = staging.device.deviceOf(address);
        return dev >= 0 ? MemoryLocation.cuda(dev) : null;
    }

    /**
     * {@link DeviceMemoryAccess.Kind#STAGED} for {@code cuda:N} when device memory is usable here
     * (bounce-buffer staging over the network, device copies to the own segment);
     * {@link DeviceMemoryAccess.Kind#UNSUPPORTED} with the cause and the fix otherwise.
     */
    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        if (!MemoryLocation.isCuda(location)) {
            return DeviceMemoryAccess.unknown();
        }
        try {
            staging.device.checkLocation(location);
        } catch (RuntimeException e) {
            return DeviceMemoryAccess.unsupported(String.format(Locale.ROOT,
                    "the TCP transport reaches GPU memory at %s by staging it through pinned host memory with %s, "
                            + "but: %s", location, staging.device.name(), e.getMessage()));
        }
        return DeviceMemoryAccess.staged(String.format(Locale.ROOT,
                "staged through pinned host bounce buffers (%s; %s copies pipelined with the socket); "
                        + "transfers to the own segment copy device to device", staging.config, staging.device.name()));
    }

    /**
     * A transfer to the own segment touching GPU memory: device to device, host to device or device
     * to host on a pooled stager's copy queue (of the source device, or of the destination device for
     * host to device), waited for; both buffers held against unregistration meanwhile.
     */
    @Override
    public int copyLocal(long src, LocalBuffer srcBuffer, long dst, LocalBuffer dstBuffer, long len) {
        Buffer sb = memory.registry.find(src, len);
        Buffer db = memory.registry.find(dst, len);
        if (sb == null || db == null) {
            return COPY_FAILED;
        }
        try (LocalMemory.Slot slot = memory.slot(() -> { })) {
            if (!slot.enter(0, sb)) {
                return COPY_FAILED;
            }
            try {
                if (!slot.enter(1, db)) {
                    return COPY_FAILED;
                }
                try {
                    int sd = DeviceStaging.deviceOf(sb);
                    int dd = DeviceStaging.deviceOf(db);
                    if (sd < 0 && dd < 0) {
                        java.lang.foreign.MemorySegment.copy(LocalMemory.ALL, src, LocalMemory.ALL, dst, len);
                        return COPIED;
                    }
                    Stager st = staging.borrow();
                    if (st == null) {
                        return COPY_FAILED;
                    }
                    try {
                        DeviceMemory.Direction dir = DeviceMemory.Direction.of(dd >= 0, sd >= 0);
                        return st.copy(sd >= 0 ? sd : dd, dst, src, len, dir) == Stager.OK ? COPIED : COPY_FAILED;
                    } finally {
                        staging.release(st);
                    }
                } finally {
                    slot.exit(1);
                }
            } finally {
                slot.exit(0);
            }
        }
    }

    @Override
    public void describe(DescriptorContribution out) {
        out.tcpDataPort(dataPort());
    }

    // ------------------------------------------------------------------ transfers

    @Override
    public boolean reaches(RemoteSegment peer) {
        return peer.descriptor().tcpDataPort() > 0;
    }

    @Override
    public boolean canTransfer(RemoteSegment peer, LocalBuffer local, SegmentDescriptor.Buffer remote) {
        return installed && peer.descriptor().tcpDataPort() > 0;
    }

    @Override
    public void submit(RemoteSegment peer, SliceGroup slices) {
        BatchTasks b = slices.batch();
        int n = slices.size();
        Link link = links.computeIfAbsent(peer.id(), id -> new Link(peer));
        int[] tasks = null;
        if (!slices.contiguous()) {
            tasks = new int[n];
            for (int i = 0; i < n; i++) {
                tasks[i] = slices.task(i);
            }
        }
        int from = slices.task(0);
        for (int attempt = 0; attempt < 3; attempt++) {
            Peer p = link.peer();
            if (p == null) {
                break;
            }
            if (tasks == null ? p.offer(b, from, from + n) : p.offer(b, tasks)) {
                return;
            }
            // retired for idleness between peer() and offer(): the next peer() opens a fresh one
        }
        for (int i = 0; i < n; i++) {
            b.fail(slices.task(i), NAME, SliceFailure.TRANSIENT, "peer retired");
        }
    }

    @Override
    public void evict(BatchTasks batch, long deadlineNanos) {
        for (Link l : links.values()) {
            Peer p = l.current();
            if (p != null) {
                p.evict(batch, deadlineNanos);
            }
        }
    }

    /** Closes the lanes towards {@code peer} (the link stays: its id is stable across refreshes). */
    @Override
    public void forget(RemoteSegment peer) {
        Link l = links.get(peer.id());
        if (l != null) {
            l.close();
        }
    }

    // ------------------------------------------------------------------ peers

    private void watchdogLoop() {
        long idleNanos = TimeUnit.MILLISECONDS.toNanos(config.peerIdleTimeoutMs());
        while (installed) {
            long now = System.nanoTime();
            for (Link l : links.values()) {
                Peer p = l.current();
                if (p != null) {
                    p.checkDeadlines(now);
                    if (!p.isDead() && now - p.lastUsed() > idleNanos && p.retireIfIdle(now - idleNanos)) {
                        retiredPeers.incrementAndGet();
                        LOG.debug("peer {} unused for {} ms; closed (MOONCAKE4J_TCP_PEER_IDLE_TIMEOUT_SEC)", p,
                                config.peerIdleTimeoutMs());
                    }
                }
            }
            LockSupport.parkNanos(this, 100_000_000L);
        }
    }

    /**
     * At {@link TcpConfig#maxPeers()} live peers, retires the longest-unused idle one (other than
     * {@code self}'s); false when all are busy.
     */
    private boolean makeRoomForPeer(Link self) {
        int live = 0;
        for (Link l : links.values()) {
            Peer p = l.current();
            if (l != self && p != null && !p.isDead()) {
                live++;
            }
        }
        if (live < config.maxPeers()) {
            return true;
        }
        // try the idle ones from the longest unused; a busy one refuses
        List<Peer> candidates = new ArrayList<>();
        for (Link l : links.values()) {
            Peer p = l.current();
            if (l != self && p != null && !p.isDead()) {
                candidates.add(p);
            }
        }
        candidates.sort((a, b) -> Long.compare(a.lastUsed(), b.lastUsed()));
        // A peer whose last transfer has just completed may still have a lane thread finishing its
        // bookkeeping (flags cleared, last use stamped) for a moment after the waiter saw the
        // completion: re-check for a bounded while before refusing, so that back-to-back transfers to
        // different segments at the cap do not fail on that window. Only at the cap, so rare.
        long deadline = System.nanoTime() + MAKE_ROOM_SETTLE_NANOS;
        while (true) {
            long now = System.nanoTime();
            for (Peer p : candidates) {
                if (p.retireIfIdle(now)) {
                    retiredPeers.incrementAndGet();
                    LOG.debug("peer {} closed to make room (MOONCAKE4J_TCP_MAX_PEERS)", p);
                    return true;
                }
            }
            if (now - deadline > 0) {
                return false;
            }
            LockSupport.parkNanos(200_000);
        }
    }

    // ------------------------------------------------------------------ monitoring

    /** The data port; 0 before install. */
    public int dataPort() {
        TcpDataServer d = data;
        return d == null ? 0 : d.port();
    }

    public long rejectedDataRequests() {
        TcpDataServer d = data;
        return d == null ? 0 : d.rejectedRequests();
    }

    /** Requests the data port refused because they came from this engine itself (its tag, {@link TcpWire}). */
    public long selfRefusedDataRequests() {
        TcpDataServer d = data;
        return d == null ? 0 : d.selfRefused.get();
    }

    @Override
    public EngineCounters counters() {
        return new EngineCounters(rejectedDataRequests(), idleClosedDataSessions(), 0, 0, 0, 0,
                peerLimitHits.get(), 0, 0);
    }

    int openDataSessions() {
        TcpDataServer d = data;
        return d == null ? 0 : d.openSessions();
    }

    long idleClosedDataSessions() {
        TcpDataServer d = data;
        return d == null ? 0 : d.idleClosedSessions();
    }

    int livePeers() {
        int n = 0;
        for (Link l : links.values()) {
            Peer p = l.current();
            if (p != null && !p.isDead()) {
                n++;
            }
        }
        return n;
    }

    long retiredPeers() {
        return retiredPeers.get();
    }

    public long stagedBytes() {
        return staging.stagedBytes();
    }

    public long copyFailures() {
        return staging.copyFailures();
    }

    int stagers() {
        return staging.stagers();
    }

    long stagerWaits() {
        return staging.borrowWaits();
    }
}
