package io.mooncake4j.engine.tcp;

// Over 800 lines: still a whole engine (lifecycle, segments, submission and the TCP data path in one
// class). Its engine-level calls already live in engine.internal (EngineCalls, SegmentOpenings,
// HandshakeService); splitting the rest into the engine core and a transport behind engine.spi is
// issue 11's remaining step (docs/architecture.md, "Core and transports").

import io.mooncake4j.engine.BufferRegistry.Buffer;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.internal.BatchTable;
import io.mooncake4j.engine.internal.EngineCalls;
import io.mooncake4j.engine.internal.HandshakeService;
import io.mooncake4j.engine.internal.SegmentOpenings;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link TransferEngine} speaking Mooncake's P2P handshake and TCP transport, wire-compatible
 * with the C++ Mooncake Transfer Engine ({@code protocol = "tcp"}, metadata server
 * {@code P2PHANDSHAKE}). Obtain one with {@code TransferEngines.create("tcp")}.
 *
 * <ul>
 *   <li>{@link #initialize} binds the RPC port and the data port at random in
 *       {@code [MC_MIN_RPC_PORT, MC_MAX_RPC_PORT]} and names the segment {@code host:rpcPort}.
 *       {@code protocol} is honoured explicitly (Mooncake's Python binding ignores it): {@code "tcp"}
 *       works, anything else returns -1 with a logged reason.</li>
 *   <li>{@link #openSegment} fetches and caches the peer's descriptor (Metadata request); a peer
 *       whose connection fails is re-fetched before the next submission, so a restarted peer is
 *       picked up. Names are mapped to the segment's resolved identity (for TCP the resolved data
 *       address): aliases of one engine ({@code localhost:p}, {@code 127.0.0.1:p}, …) share one
 *       segment id and one peer. No engine-wide lock is held across a fetch; concurrent opens of one
 *       name share its fetch, bounded by {@code MOONCAKE4J_HANDSHAKE_CLIENT_TIMEOUT_MS}. At most
 *       {@link TcpConfig#maxSegments()} names are accepted.</li>
 *   <li>Peers (lanes and their threads) unused for {@link TcpConfig#peerIdleTimeoutMs()} are closed
 *       and reopened on the next transfer; at most {@link TcpConfig#maxPeers()} are live, a new one
 *       closes the longest-unused idle one, or fails its transfer when all are busy.</li>
 *   <li>Transfers to a peer run over {@link TcpConfig#lanesPerPeer()} persistent, pipelined
 *       connections; transfers to the own segment are a direct memory copy with the same address
 *       validation as the data server.</li>
 *   <li>Unlike Mooncake's TCP transport, the local side of every transfer must lie in memory
 *       registered with this engine (the data path reads and writes it directly); other requests
 *       fail.</li>
 *   <li>GPU memory ({@code cuda:N}, or {@code *} detected by the {@link DeviceMemory}) is moved
 *       through pinned bounce buffers with pipelined asynchronous copies on both sides, and with
 *       device copies to the own segment; without CUDA its registration fails with the cause
 *       ({@link #deviceMemoryAccess} says so beforehand).</li>
 * </ul>
 *
 * <p>Thread-safe. Threads: {@code mooncake-handshake-*}, {@code mooncake-target-*},
 * {@code mooncake-initiator-*}; all stop in {@link #close()}.
 */
public final class TcpTransferEngine implements TransferEngine {

    private static final Logger LOG = LoggerFactory.getLogger(TcpTransferEngine.class);
    private static final AtomicInteger ENGINES = new AtomicInteger();
    private static final String CONNECTION_REPLY = emptyHandshakeDesc();

    /** A notification received through the handshake port (Notify, type 2). */
    public record Notify(String name, String message) {}

    /** An opened peer segment: its descriptor and the lanes towards it. */
    private final class Segment {
        final long id;
        /** The resolved identity aliases share ({@link #identity}). */
        final String key;
        volatile SegmentDescriptor descriptor;
        /** Written under the segment's monitor, read lock-free by the watchdog and aborts. */
        private volatile Peer peer;

        Segment(long id, String key, SegmentDescriptor descriptor) {
            this.id = id;
            this.key = key;
            this.descriptor = descriptor;
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
            if (closed) {
                return null;
            }
            if (peer != null) {
                Peer old = peer;
                peer = null;
                boolean retired = old.isRetired();
                old.close();
                if (!retired && !refresh()) {
                    return null;
                }
            }
            SegmentDescriptor d = descriptor;
            if (!d.protocol().equals("tcp")) {
                return null;
            }
            if (!makeRoomForPeer(this)) {
                if (peerLimitHits.incrementAndGet() <= 10) {
                    LOG.warn("cannot open a connection to segment {}: {} peers are in use, none idle "
                            + "(MOONCAKE4J_TCP_MAX_PEERS); its transfers fail", d.name(), config.maxPeers());
                }
                return null;
            }
            peer = new Peer(id, d, config, memory, engineSerial * 1000 + peerSerial.getAndIncrement());
            return peer;
        }

        Peer current() {
            return peer;
        }

        /** Re-fetches the descriptor from the name it advertises; false (logged) on failure. */
        synchronized boolean refresh() {
            SegmentDescriptor d = descriptor;
            try {
                SegmentDescriptor fresh = client.fetchDescriptor(
                        PeerAddress.parse(d.name(), config.handshake().defaultPort()), "{}\n");
                if (!fresh.equals(d)) {
                    LOG.info("segment {} refreshed: data port {} -> {}, {} buffers", d.name(), d.tcpDataPort(),
                            fresh.tcpDataPort(), fresh.buffers().size());
                }
                descriptor = fresh;
                if (peer != null && (fresh.tcpDataPort() != d.tcpDataPort() || !fresh.name().equals(d.name())
                        || fresh.tcpProtoVersion() != d.tcpProtoVersion())) {
                    Peer old = peer;
                    peer = null;
                    old.close();
                }
                return true;
            } catch (HandshakeException e) {
                LOG.warn("cannot refresh segment {}: {}", d.name(), e.getMessage());
                return false;
            }
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
    private final HandshakeClient client;
    private final int engineSerial = ENGINES.getAndIncrement();
    private final AtomicInteger peerSerial = new AtomicInteger();
    /** Every name {@code openSegment} resolved (aliases included) → segment id; guarded for writes by itself. */
    private final Map<String, Long> segmentIds = new ConcurrentHashMap<>();
    /** Resolved identity ({@link #identity}) → segment id; written under {@link #segmentIds}. */
    private final Map<String, Long> identityIds = new ConcurrentHashMap<>();
    /** Names whose descriptor is being fetched now: later callers for the same name wait for that fetch. */
    private final SegmentOpenings opening;
    private final Map<Long, Segment> segments = new ConcurrentHashMap<>();
    private final AtomicLong peerLimitHits = new AtomicLong();
    private final AtomicLong segmentLimitHits = new AtomicLong();
    private final AtomicLong retiredPeers = new AtomicLong();
    private final AtomicLong nextSegmentId = new AtomicLong(1);
    private final EngineCalls<Batch> calls = new EngineCalls<>(Batch::new, new Calls());
    private final BatchTable<Batch> batches = calls.batches();
    private final HandshakeService handshakes = new HandshakeService(() -> localDescriptor().toJson(),
            request -> CONNECTION_REPLY);
    /** Per calling thread, the batch of its last synchronous call, reused when it finished cleanly. */
    private final ThreadLocal<Batch> syncBatch = new ThreadLocal<>();
    private final Object lifecycle = new Object();

    private volatile HandshakeServer rpc;
    private volatile TcpDataServer data;
    private volatile Thread watchdog;
    private volatile String host;
    private volatile String segmentName;
    private volatile String protocol;
    private volatile boolean closed;

    /** An engine configured from the environment ({@link TcpConfig#fromEnvironment()}). */
    public TcpTransferEngine() {
        this(TcpConfig.fromEnvironment());
    }

    /** An engine with explicit settings (tests use OS-assigned ports on 127.0.0.1); GPU memory through CUDA. */
    public TcpTransferEngine(TcpConfig config) {
        this(config, CudaDeviceMemory.INSTANCE);
    }

    /**
     * An engine with explicit settings whose GPU memory ({@code cuda:N} buffers) is reached through
     * {@code deviceMemory}: staged through its pinned bounce buffers over the network, copied with its
     * queues for transfers to the own segment. Staging settings come from the environment
     * ({@code MOONCAKE4J_TCP_STAGING_*}).
     */
    public TcpTransferEngine(TcpConfig config, DeviceMemory deviceMemory) {
        this(config, deviceMemory, StagingConfig.fromEnvironment());
    }

    TcpTransferEngine(TcpConfig config, DeviceMemory deviceMemory, StagingConfig staging) {
        this.config = config;
        this.staging = new DeviceStaging(Objects.requireNonNull(deviceMemory, "deviceMemory"), staging);
        this.memory = new LocalMemory(TimeUnit.MILLISECONDS.toNanos(config.unregisterWaitMs()), this.staging);
        this.client = new HandshakeClient(config.handshake());
        this.opening = new SegmentOpenings(config.handshake().clientRequestTimeoutMs() + 5_000L);
    }

    /** The TCP steps of the engine-level calls {@link EngineCalls} makes. */
    private final class Calls implements EngineCalls.Hooks<Batch> {
        @Override
        public boolean closed() {
            return closed;
        }

        @Override
        public long openSegment(String name) {
            return TcpTransferEngine.this.openSegment(name);
        }

        @Override
        public int opcode(TransferRequest.Opcode op) {
            return op.wire();
        }

        @Override
        public int submit(Batch b, int n, int[] ops, int opAll, long[] targets, long targetAll, long[] local,
                long[] remote, long[] lens) {
            return TcpTransferEngine.this.submit(b, n, ops, opAll, targets, targetAll, local, remote, lens);
        }

        @Override
        public Batch syncBatch(int n) {
            return reusableBatch(n);
        }

        @Override
        public void abort(Batch b) {
            TcpTransferEngine.this.abort(b);
        }

        @Override
        public boolean await(Batch b, long deadlineNanos) {
            return b.await(deadlineNanos);
        }

        @Override
        public long transferTimeoutMs() {
            return config.transferTimeoutMs();
        }
    }

    // ------------------------------------------------------------------ lifecycle

    @Override
    public int initialize(String localHostname, String metadataServer, String protocol, String deviceName) {
        synchronized (lifecycle) {
            String refusal = EngineCalls.initializeRefusal(closed, rpc != null, metadataServer);
            if (refusal != null) {
                LOG.error(refusal);
                return -1;
            }
            String proto = protocol == null ? "" : protocol.trim().toLowerCase(Locale.ROOT);
            if (proto.equals("rdma")) {
                LOG.error("initialize: protocol \"rdma\" is not served by the TCP engine; create the engine with "
                        + "TransferEngines.create(\"rdma\") or \"auto\" ({}), or use protocol \"tcp\" "
                        + "(and MC_FORCE_TCP=1 on C++ peers)",
                        io.mooncake4j.engine.rdma.RdmaAvailability.unavailabilityCause()
                                .map(io.mooncake4j.engine.rdma.RdmaAvailability.Cause::message)
                                .orElse("RDMA devices are present here"));
                return -1;
            }
            if (!proto.equals("tcp")) {
                LOG.error("initialize: unsupported protocol '{}'; use \"tcp\"", protocol);
                return -1;
            }
            String badHost = EngineCalls.hostnameRefusal(localHostname);
            if (badHost != null) {
                LOG.error(badHost);
                return -1;
            }
            String h = PeerAddress.parse(localHostname.trim(), config.handshake().defaultPort()).host();
            HandshakeServer server = null;
            try {
                server = HandshakeServer.start(config.handshake(), this::handle);
                TcpDataServer d = TcpDataServer.start(config.dataListen(), memory, config.dataIdleTimeoutMs(),
                        config.maxDataConnections());
                this.host = h;
                this.rpc = server;
                this.data = d;
                this.protocol = "tcp";
                this.segmentName = PeerAddress.format(h, server.port());
            } catch (IOException e) {
                LOG.error("initialize: cannot bind the RPC or data port: {}", e.getMessage());
                if (server != null) {
                    server.close();
                }
                return -1;
            }
            Thread w = Thread.ofPlatform().daemon(true).name("mooncake-initiator-watchdog-" + engineSerial)
                    .unstarted(this::watchdogLoop);
            watchdog = w;
            w.start();
            LOG.info("Transfer Engine RPC using P2P handshake, listening on {}:{}", h, rpc.port());
            LOG.info("TCP transport: data port {}, {} lanes per peer, window {}, protocol version 2", data.port(),
                    config.lanesPerPeer(), config.window());
            return 0;
        }
    }

    @Override
    public int getRpcPort() {
        HandshakeServer s = rpc;
        return s == null ? 0 : s.port();
    }

    /** The TCP data port advertised in the descriptor; 0 before initialisation. */
    public int getDataPort() {
        TcpDataServer d = data;
        return d == null ? 0 : d.port();
    }

    @Override
    public String getLocalSegmentName() {
        return segmentName;
    }

    /** Data-port requests rejected so far (outside registered memory, bad opcode); for monitoring. */
    public long rejectedDataRequests() {
        TcpDataServer d = data;
        return d == null ? 0 : d.rejectedRequests();
    }

    /** Open data-port sessions (package-private, for tests). */
    int openDataSessionsForTest() {
        TcpDataServer d = data;
        return d == null ? 0 : d.openSessions();
    }

    /** Data-port sessions closed for idleness so far (package-private, for tests). */
    long idleClosedDataSessionsForTest() {
        TcpDataServer d = data;
        return d == null ? 0 : d.idleClosedSessions();
    }

    /** {@code host:rpcPort} without IPv6 brackets (Mooncake {@code getLocalIpAndPort}). */
    public String getLocalIpAndPort() {
        return host == null ? null : host + ":" + getRpcPort();
    }

    @Override
    public String protocol() {
        return protocol;
    }

    /** The descriptor this engine serves to Metadata requests. */
    public SegmentDescriptor localDescriptor() {
        List<SegmentDescriptor.Buffer> bufs = new ArrayList<>();
        for (Buffer b : memory.registry.snapshot()) {
            bufs.add(SegmentDescriptor.Buffer.tcp(segmentName, b.address(), b.length()));
        }
        return SegmentDescriptor.tcp(segmentName, getDataPort(), bufs);
    }

    /** Drains the notifications received so far (Mooncake {@code getNotifies}). */
    public List<Notify> getNotifies() {
        return handshakes.drainNotifies(Notify::new);
    }

    /** Sends a Notify to a peer; 0 or a negative {@link ErrorCodes} value. */
    public int sendNotify(String targetSession, String name, String message) {
        try {
            client.notify(PeerAddress.parse(targetSession, config.handshake().defaultPort()), name, message);
            return 0;
        } catch (HandshakeException e) {
            LOG.warn("notify to {} failed: {}", targetSession, e.getMessage());
            return e.errorCode();
        }
    }

    /** Probes a peer's handshake port; 0 or a negative {@link ErrorCodes} value. */
    public int sendProbe(String targetSession) {
        try {
            client.probe(PeerAddress.parse(targetSession, config.handshake().defaultPort()));
            return 0;
        } catch (HandshakeException e) {
            LOG.warn("probe of {} failed: {}", targetSession, e.getMessage());
            return e.errorCode();
        }
    }

    private String handle(int type, Object request) {
        return handshakes.handle(type, request);
    }

    private static String emptyHandshakeDesc() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("local_gid", "");
        m.put("local_lid", 0L);
        m.put("local_nic_path", "");
        m.put("payload", "");
        m.put("peer_nic_path", "");
        m.put("qp_num", List.of());
        m.put("reply_msg", "");
        return Json.write(m, true) + "\n";
    }

    private void watchdogLoop() {
        long idleNanos = TimeUnit.MILLISECONDS.toNanos(config.peerIdleTimeoutMs());
        while (!closed) {
            long now = System.nanoTime();
            for (Segment s : segments.values()) {
                Peer p = s.current();
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

    @Override
    public void close() {
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            closed = true;
        }
        for (Batch b : batches.all()) {
            b.aborted = true;
            b.failAll(Batch.FAILED);
        }
        for (Segment s : segments.values()) {
            s.close();
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
        HandshakeServer r = rpc;
        if (r != null) {
            r.close();
        }
        TcpDataServer d = data;
        if (d != null) {
            d.close();
        }
        staging.close();
        LOG.info("transfer engine {} closed", segmentName);
    }

    // ------------------------------------------------------------------ memory

    /**
     * {@inheritDoc}
     *
     * <p>{@code cuda:N} memory is checked first: without CUDA (or without device N) the cause and
     * its fix are logged and {@link ErrorCodes#DEVICE_NOT_FOUND} is returned. {@code "*"} is
     * resolved as Mooncake does: device memory is registered as {@code cuda:N}, anything else stays
     * {@code "*"} (host memory).
     */
    @Override
    public int registerMemory(long address, long length, String location) {
        if (closed) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        String[] locs = {location == null ? MemoryLocation.WILDCARD : location};
        int rc = resolveLocations(new long[] {address}, locs);
        return rc != 0 ? rc : memory.register(new long[] {address}, new long[] {length}, locs);
    }

    /** Registers with location {@code "*"}, resolved per buffer (see {@link #registerMemory}). */
    @Override
    public int batchRegisterMemory(long[] addresses, long[] lengths) {
        if (closed || addresses == null || lengths == null || addresses.length != lengths.length) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        String[] locs = new String[addresses.length];
        Arrays.fill(locs, MemoryLocation.WILDCARD);
        int rc = resolveLocations(addresses, locs);
        return rc != 0 ? rc : memory.register(addresses, lengths, locs);
    }

    /** Checks {@code cuda:N} locations and resolves {@code "*"} ones in place; 0 or an error code (logged). */
    private int resolveLocations(long[] addresses, String[] locs) {
        for (int i = 0; i < locs.length; i++) {
            String loc = locs[i];
            if (MemoryLocation.WILDCARD.equals(loc)) {
                int dev = staging.device.deviceOf(addresses[i]);
                if (dev >= 0) {
                    locs[i] = MemoryLocation.cuda(dev);
                }
            } else if (MemoryLocation.isCuda(loc)) {
                try {
                    staging.device.checkLocation(loc);
                } catch (RuntimeException e) {
                    LOG.error("registerMemory(0x{}, {}): {}", Long.toHexString(addresses[i]), loc, e.getMessage());
                    return ErrorCodes.DEVICE_NOT_FOUND;
                }
            }
        }
        return 0;
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

    /** Bytes moved between GPU memory and sockets through bounce buffers so far. */
    public long stagedDeviceBytes() {
        return staging.stagedBytes();
    }

    /** Failed GPU copies so far (each failed its transfer). */
    public long deviceCopyFailures() {
        return staging.copyFailures();
    }

    /** Stagers (bounce-buffer sets) alive now (package-private, for tests). */
    int stagersForTest() {
        return staging.stagers();
    }

    /** Times a data-port session or local copy waited for a pooled stager (package-private, for tests). */
    long stagerWaitsForTest() {
        return staging.borrowWaits();
    }

    @Override
    public int unregisterMemory(long address) {
        return memory.unregister(new long[] {address});
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        if (addresses == null) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        return memory.unregister(addresses);
    }

    // ------------------------------------------------------------------ segments

    @Override
    public long openSegment(String name) {
        String n = EngineCalls.normalizedSegmentName(name);
        if (closed || segmentName == null || n == null) {
            return -1;
        }
        if (n.equals(segmentName)) {
            return 0;
        }
        Long id = segmentIds.get(n);
        if (id != null) {
            return id;
        }
        return opening.open(n, this::fetchAndRegister);
    }

    /**
     * Fetches the descriptor of {@code n} (no engine-wide lock held: one unresponsive endpoint stalls
     * only the callers opening that name) and maps {@code n} to the segment of its resolved identity,
     * so that aliases of one engine share one segment and one peer.
     */
    private long fetchAndRegister(String n) {
        Long id = segmentIds.get(n);
        if (id != null) {
            return id;
        }
        if (segmentIds.size() >= config.maxSegments()) {
            if (segmentLimitHits.incrementAndGet() <= 10) {
                LOG.warn("openSegment({}) refused: {} segment names are open (MOONCAKE4J_TCP_MAX_SEGMENTS)", n,
                        segmentIds.size());
            }
            return -1;
        }
        SegmentDescriptor d;
        try {
            d = client.fetchDescriptor(PeerAddress.parse(n, config.handshake().defaultPort()),
                    localDescriptor().toJson());
        } catch (HandshakeException e) {
            LOG.warn("openSegment({}) failed: {}", n, e.getMessage());
            return -1;
        }
        String key = identity(d);
        synchronized (segmentIds) {
            if (closed) {
                return -1;
            }
            id = segmentIds.get(n);
            if (id != null) {
                return id;
            }
            long sid;
            if (key.equals(identity(localDescriptor()))) {
                sid = 0; // an alias of this engine's own segment
            } else {
                Long existing = identityIds.get(key);
                if (existing != null) {
                    sid = existing;
                } else {
                    sid = nextSegmentId.getAndIncrement();
                    segments.put(sid, new Segment(sid, key, d));
                    identityIds.put(key, sid);
                }
            }
            segmentIds.put(n, sid);
            LOG.debug("opened segment {} as {} ({}): protocol {}, data port {}, {} buffers", n, sid, key,
                    d.protocol(), d.tcpDataPort(), d.buffers().size());
            return sid;
        }
    }

    /**
     * The identity aliases share: for TCP the resolved data address the lanes connect to
     * ({@code tcp:<ip>:<dataPort>}), else the descriptor's name.
     */
    private static String identity(SegmentDescriptor d) {
        if (!d.protocol().equals("tcp")) {
            return "name:" + d.name();
        }
        String host = d.host();
        String ip;
        try {
            ip = java.net.InetAddress.getByName(host).getHostAddress();
        } catch (java.net.UnknownHostException e) {
            ip = "unresolved/" + host;
        }
        return "tcp:" + ip + ":" + d.tcpDataPort();
    }

    /**
     * At {@link TcpConfig#maxPeers()} live peers, retires the longest-unused idle one (other than
     * {@code self}'s); false when all are busy.
     */
    private boolean makeRoomForPeer(Segment self) {
        int live = 0;
        for (Segment s : segments.values()) {
            Peer p = s.current();
            if (s != self && p != null && !p.isDead()) {
                live++;
            }
        }
        if (live < config.maxPeers()) {
            return true;
        }
        // try the idle ones from the longest unused; a busy one refuses
        List<Peer> candidates = new ArrayList<>();
        for (Segment s : segments.values()) {
            Peer p = s.current();
            if (s != self && p != null && !p.isDead()) {
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
            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
        }
    }

    /** How long {@link #makeRoomForPeer} waits for a just-finished peer's lanes to settle. */
    private static final long MAKE_ROOM_SETTLE_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(200);

    /** Peers with live lanes now (package-private, for tests and monitoring). */
    int livePeersForTest() {
        int n = 0;
        for (Segment s : segments.values()) {
            Peer p = s.current();
            if (p != null && !p.isDead()) {
                n++;
            }
        }
        return n;
    }

    /** Descriptor fetches in flight now (package-private, for tests). */
    int openingsInFlightForTest() {
        return opening.inFlight();
    }

    /** Peers closed so far for idleness or to make room (package-private, for tests). */
    long retiredPeersForTest() {
        return retiredPeers.get();
    }

    /** {@code buffers[0].addr} of the (cached) descriptor of {@code name}; -1 if it cannot be opened or has none. */
    @Override
    public long getFirstBufferAddress(String name) {
        long id = openSegment(name);
        if (id < 0) {
            return -1;
        }
        Segment s = id == 0 ? null : segments.get(id);
        List<SegmentDescriptor.Buffer> buffers = s == null ? localDescriptor().buffers() : s.descriptor.buffers();
        return buffers.isEmpty() ? -1 : buffers.get(0).addr();
    }

    // ------------------------------------------------------------------ batches

    @Override
    public long allocateBatchId(int capacity) {
        return calls.allocateBatchId(capacity);
    }

    @Override
    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        return calls.submitTransfer(batchId, requests);
    }

    @Override
    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return calls.getTransferStatus(batchId, taskIndex);
    }

    @Override
    public int freeBatchId(long batchId) {
        return calls.freeBatchId(batchId);
    }

    @Override
    public int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths) {
        return calls.sync(targetSession, TransferRequest.Opcode.WRITE, src, dst, lengths);
    }

    @Override
    public int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths) {
        return calls.sync(targetSession, TransferRequest.Opcode.READ, local, remote, lengths);
    }

    /** A batch for a synchronous call: this thread's previous one when it fits and finished cleanly. */
    private Batch reusableBatch(int n) {
        Batch b = syncBatch.get();
        if (b != null && b.capacity >= n && b.reset()) {
            return b;
        }
        b = new Batch(-1, Math.max(n, 16));
        syncBatch.set(b);
        return b;
    }

    /** Fails what is left of {@code b} and waits until no lane touches its memory any more. */
    private void abort(Batch b) {
        b.aborted = true;
        b.failAll(Batch.TIMEOUT);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (Segment s : segments.values()) {
            Peer p = s.current();
            if (p != null) {
                p.evict(b, deadline);
            }
        }
    }

    /**
     * Appends and starts tasks. {@code ops}/{@code targets} may be null, then {@code opAll}/
     * {@code targetAll} apply to every task.
     */
    private int submit(Batch b, int n, int[] ops, int opAll, long[] targets, long targetAll, long[] local,
            long[] remote, long[] lens) {
        if (closed) {
            return StatusCodes.INVALID_ARGUMENT;
        }
        int first;
        synchronized (b) {
            if (b.size() + n > b.capacity) {
                return StatusCodes.TOO_MANY_REQUESTS;
            }
            for (int i = 0; i < n; i++) {
                long t = targets == null ? targetAll : targets[i];
                int op = ops == null ? opAll : ops[i];
                if (op != TcpWire.OP_READ && op != TcpWire.OP_WRITE || lens[i] < 0) {
                    return StatusCodes.INVALID_ARGUMENT;
                }
                if (t != 0) {
                    Segment s = segments.get(t);
                    if (s == null) {
                        return StatusCodes.INVALID_ARGUMENT;
                    }
                    if (!s.descriptor.protocol().equals("tcp")) {
                        return StatusCodes.NOT_SUPPORTED_TRANSPORT;
                    }
                }
            }
            first = b.size();
            for (int i = 0; i < n; i++) {
                b.append(ops == null ? opAll : ops[i], local[i], targets == null ? targetAll : targets[i], remote[i],
                        lens[i]);
            }
        }
        // local copies and trivial tasks first; remote tasks grouped per target
        long singleTarget = -1;
        int remoteCount = 0;
        LocalMemory.Slot slot = null;
        try {
            for (int k = 0; k < n; k++) {
                int i = first + k;
                long t = b.target[i];
                if (b.length[i] == 0) {
                    b.finish(i, Batch.COMPLETED);
                } else if (t == 0) {
                    if (slot == null) {
                        slot = memory.slot(() -> { });
                    }
                    b.finish(i, localCopy(b, i, slot) ? Batch.COMPLETED : Batch.FAILED);
                } else {
                    remoteCount++;
                    if (singleTarget == -1) {
                        singleTarget = t;
                    } else if (singleTarget != t) {
                        singleTarget = -2;
                    }
                }
            }
        } finally {
            if (slot != null) {
                slot.close();
            }
        }
        if (remoteCount == 0) {
            return StatusCodes.OK;
        }
        if (singleTarget >= 0 && remoteCount == n) {
            dispatchRange(b, singleTarget, first, first + n);
        } else if (singleTarget >= 0) {
            dispatch(b, singleTarget, remoteTasks(b, first, n, singleTarget, remoteCount));
        } else {
            Map<Long, Integer> perTarget = new LinkedHashMap<>();
            for (int k = 0; k < n; k++) {
                int i = first + k;
                if (b.target[i] != 0 && b.length[i] != 0) {
                    perTarget.merge(b.target[i], 1, Integer::sum);
                }
            }
            for (Map.Entry<Long, Integer> e : perTarget.entrySet()) {
                dispatch(b, e.getKey(), remoteTasks(b, first, n, e.getKey(), e.getValue()));
            }
        }
        return StatusCodes.OK;
    }

    private static int[] remoteTasks(Batch b, int first, int n, long target, int count) {
        int[] idx = new int[count];
        int j = 0;
        for (int k = 0; k < n; k++) {
            int i = first + k;
            if (b.target[i] == target && b.length[i] != 0) {
                idx[j++] = i;
            }
        }
        return idx;
    }

    /** Like {@link #dispatch} for a contiguous range of tasks, without an index array. */
    private void dispatchRange(Batch b, long target, int from, int to) {
        Segment s = segments.get(target);
        boolean refreshed = false;
        int kept = 0;
        for (int i = from; i < to; i++) {
            if (precheck(b, i, s, refreshed)) {
                kept++;
            } else if (!b.isTerminal(i)) {
                refreshed = true;
                i--; // refreshed the descriptor: check this task again
            }
        }
        if (kept == 0) {
            return;
        }
        for (int attempt = 0; attempt < 3; attempt++) {
            Peer p = s.peer();
            if (p == null) {
                break;
            }
            if (p.offer(b, from, to)) {
                return;
            }
            // retired for idleness between peer() and offer(): the next peer() opens a fresh one
        }
        for (int i = from; i < to; i++) {
            b.finish(i, Batch.FAILED);
        }
    }

    /**
     * Checks one task before it is queued: true to send it; false when it was failed, or (only
     * when {@code refreshed} is false) when the remote range is not in the cached descriptor and the
     * descriptor was refreshed, so that the caller checks again.
     */
    private boolean precheck(Batch b, int i, Segment s, boolean refreshed) {
        long local = b.local[i];
        long len = b.length[i];
        if (b.isTerminal(i)) {
            return false;
        }
        if (memory.registry.find(local, len) == null) {
            LOG.warn("transfer of {} bytes from local 0x{}: not inside registered memory", len,
                    Long.toHexString(local));
            b.finish(i, Batch.FAILED);
            return false;
        }
        if (!inDescriptor(s.descriptor, b.remote[i], len)) {
            if (!refreshed) {
                s.refresh();
                return false;
            }
            LOG.warn("transfer of {} bytes at 0x{} of {}: not inside the peer's registered buffers", len,
                    Long.toHexString(b.remote[i]), s.descriptor.name());
            b.finish(i, Batch.FAILED);
            return false;
        }
        return true;
    }

    /** Pre-checks remote ranges against the cached descriptor (refreshing it once on a miss) and queues the rest. */
    private void dispatch(Batch b, long target, int[] idx) {
        Segment s = segments.get(target);
        boolean refreshed = false;
        int kept = 0;
        for (int i : idx) {
            long local = b.local[i];
            long len = b.length[i];
            if (memory.registry.find(local, len) == null) {
                LOG.warn("transfer of {} bytes from local 0x{}: not inside registered memory", len,
                        Long.toHexString(local));
                b.finish(i, Batch.FAILED);
                continue;
            }
            if (!inDescriptor(s.descriptor, b.remote[i], len)) {
                if (!refreshed) {
                    refreshed = true;
                    s.refresh();
                }
                if (!inDescriptor(s.descriptor, b.remote[i], len)) {
                    LOG.warn("transfer of {} bytes at 0x{} of {}: not inside the peer's registered buffers", len,
                            Long.toHexString(b.remote[i]), s.descriptor.name());
                    b.finish(i, Batch.FAILED);
                    continue;
                }
            }
            idx[kept++] = i;
        }
        if (kept == 0) {
            return;
        }
        int[] todo = kept == idx.length ? idx : Arrays.copyOf(idx, kept);
        for (int attempt = 0; attempt < 3; attempt++) {
            Peer p = s.peer();
            if (p == null) {
                break;
            }
            if (p.offer(b, todo)) {
                return;
            }
        }
        for (int i : todo) {
            b.finish(i, Batch.FAILED);
        }
    }

    private static boolean inDescriptor(SegmentDescriptor d, long addr, long len) {
        List<SegmentDescriptor.Buffer> bufs = d.buffers();
        for (int i = 0, n = bufs.size(); i < n; i++) { // indexed: no iterator per descriptor
            if (bufs.get(i).contains(addr, len)) {
                return true;
            }
        }
        return false;
    }

    /**
     * A transfer to the own segment touching GPU memory: device to device, host to device or device
     * to host on a pooled stager's copy queue (of the source device, or of the destination device for
     * host to device), waited for.
     */
    private boolean deviceCopy(int srcDevice, int dstDevice, long src, long dst, long len) {
        Stager st = staging.borrow();
        if (st == null) {
            return false;
        }
        try {
            DeviceMemory.Direction dir = DeviceMemory.Direction.of(dstDevice >= 0, srcDevice >= 0);
            return st.copy(srcDevice >= 0 ? srcDevice : dstDevice, dst, src, len, dir) == Stager.OK;
        } finally {
            staging.release(st);
        }
    }

    /** A transfer to the own segment: both ranges validated like the data server does, then one copy. */
    private boolean localCopy(Batch b, int i, LocalMemory.Slot slot) {
        long len = b.length[i];
        long src = b.opcode[i] == TcpWire.OP_WRITE ? b.local[i] : b.remote[i];
        long dst = b.opcode[i] == TcpWire.OP_WRITE ? b.remote[i] : b.local[i];
        if (!TcpWire.validRange(src, len) || !TcpWire.validRange(dst, len)) {
            return false;
        }
        Buffer sb = memory.registry.find(src, len);
        Buffer db = memory.registry.find(dst, len);
        if (sb == null || db == null) {
            LOG.warn("local transfer of {} bytes 0x{} -> 0x{}: outside registered memory", len,
                    Long.toHexString(src), Long.toHexString(dst));
            return false;
        }
        if (!slot.enter(0, sb)) {
            return false;
        }
        try {
            if (!slot.enter(1, db)) {
                return false;
            }
            try {
                int sd = DeviceStaging.deviceOf(sb);
                int dd = DeviceStaging.deviceOf(db);
                if (sd < 0 && dd < 0) {
                    java.lang.foreign.MemorySegment.copy(LocalMemory.ALL, src, LocalMemory.ALL, dst, len);
                } else {
                    return deviceCopy(sd, dd, src, dst, len);
                }
            } finally {
                slot.exit(1);
            }
        } finally {
            slot.exit(0);
        }
        return true;
    }
}
