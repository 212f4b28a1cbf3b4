package io.mooncake4j.engine.core;

// Over 800 lines: this is the whole TransferEngine API of the core (initialize and close order,
// registration against every transport, segment opening, batches, the sync calls, notifies,
// counters); each entry point is short and the helpers it delegates to (Router, PeerTable,
// TaskBatch, HandshakeService) already live in their own files. Splitting the API itself would
// spread the initialize and close ordering (transports drained before tasks fail) over classes.

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.Transport;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportHost;
import io.mooncake4j.memory.MemoryLocation;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine core: the one {@link TransferEngine} implementation (besides the scripted test
 * engine), after Mooncake TENT's shape. It owns initialisation, the local segment and its
 * {@link BufferRegistry}, the handshake server and client, the peer descriptors and their cache
 * ({@link PeerTable}), the batch table and the asynchronous and synchronous APIs
 * ({@link EngineCalls}), argument checks, the local short-circuit, and the choice of transport per
 * slice with fallback ({@link Router}). Transports ({@link Transport}: tcp, rdma, shm, cuda-ipc) only move
 * bytes; which ones are installed follows {@code protocol} and {@code MC_TRANSPORTS}
 * ({@link TransportPlan}).
 *
 * <p>{@link EngineBuilder} makes it from {@link EngineSettings} and the transports offered
 * ({@link TransportLoader} finds the transports' providers; {@code TransferEngines.create} and the
 * single-transport engines of tests and benchmarks go through it). A transport's monitoring getters
 * are its own ({@code TcpTransport.in(engine)}, {@code RdmaTransport.in(engine)}), found through
 * {@link TransportHost}.
 *
 * <p>Thread-safe. Registration and lifecycle calls serialise on a lock; transfers run from any
 * number of threads. Threads: {@code mooncake-handshake-*} here, the rest belong to transports;
 * all stop in {@link #close()}.
 */
public final class CoreEngine implements TransferEngine, TransportHost {

    private static final Logger LOG = LoggerFactory.getLogger(CoreEngine.class);
    private static final String CONNECTION_REPLY = emptyHandshakeDesc();

    private final EngineSettings settings;
    private final Map<String, TransportFactory> candidates = new LinkedHashMap<>();
    private final Map<String, String> env;
    private final HandshakeClient client;
    private final BufferRegistry registry = new BufferRegistry();
    private final Object lifecycle = new Object();
    private final EngineCalls calls;
    private final BatchTable batches;
    private final Map<Integer, java.util.function.Function<Object, String>> handlers =
            new java.util.concurrent.ConcurrentHashMap<>();
    private final HandshakeService handshakes = new HandshakeService(() -> localDescriptor().toJson(),
            this::onConnection);
    private final PeerTable peers;

    private volatile Transport[] transports = new Transport[0];
    private volatile Router router;
    private volatile HandshakeServer rpc;
    /** HTTP metadata mode's store; null in P2P handshake mode. */
    private volatile MetadataDirectory directory;
    private volatile String host;
    private volatile String segmentName;
    private volatile String lastError;
    private volatile boolean closed;

    /**
     * An engine offering {@code offered} (any order: installation follows the declarations'
     * preferences, {@link TransportLoader#ORDER}; one factory per name);
     * {@link EngineBuilder} makes them.
     */
    CoreEngine(EngineSettings settings, List<TransportFactory> offered) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.env = settings.environment();
        List<TransportFactory> sorted = new ArrayList<>(offered);
        sorted.sort(java.util.Comparator.comparing(TransportFactory::declaration, TransportLoader.ORDER));
        for (TransportFactory c : sorted) {
            if (candidates.putIfAbsent(c.name(), c) != null) {
                throw new IllegalArgumentException("transport " + c.name() + " offered twice");
            }
        }
        this.calls = new EngineCalls(this, settings.transferTimeoutMs());
        this.batches = calls.batches();
        this.client = new HandshakeClient(settings.handshake());
        this.peers = new PeerTable(settings, client, this::localDescriptor, this::forgetEverywhere);
    }

    /** Whether the batch calls must refuse: closed, or not initialised. */
    boolean refusesCalls() {
        return closed || router == null;
    }

    // ------------------------------------------------------------------ lifecycle

    @Override
    public int initialize(String localHostname, String metadataServer, String protocol, String deviceName) {
        synchronized (lifecycle) {
            String refusal = EngineCalls.initializeRefusal(closed, rpc != null, metadataServer);
            if (refusal == null) {
                refusal = EngineCalls.hostnameRefusal(localHostname);
            }
            if (refusal != null) {
                return fail(refusal);
            }
            TransportPlan plan;
            try {
                plan = TransportPlan.resolve(protocol,
                        candidates.values().stream().map(TransportFactory::declaration).toList(),
                        TransportLoader.declarations(), env);
            } catch (TransferEngineException e) {
                return fail("initialize(protocol \"" + protocol + "\"): " + e.getMessage());
            }
            String filter = deviceName == null ? "" : deviceName;
            for (String r : plan.required()) {
                String why = candidates.get(r).precheck().apply(r, filter);
                if (why != null) {
                    return fail("initialize(protocol \"" + protocol + "\"): " + why);
                }
            }
            String h = PeerAddress.parse(localHostname.trim(), settings.handshake().defaultPort()).host();
            MetadataDirectory dir = null;
            if (EngineCalls.isHttp(metadataServer)) {
                try {
                    dir = MetadataDirectory.open(metadataServer, env);
                } catch (IllegalArgumentException e) {
                    return fail("initialize: " + e.getMessage());
                }
            }
            HandshakeServer server;
            try {
                server = HandshakeServer.start(settings.handshake(), this::handle);
            } catch (IOException e) {
                if (dir != null) {
                    dir.close();
                }
                return fail("initialize: cannot bind the RPC port: " + e.getMessage());
            }
            this.host = h;
            this.segmentName = PeerAddress.format(h, server.port());
            this.rpc = server;
            List<Transport> installed = new ArrayList<>();
            List<String> skipped = new ArrayList<>();
            Context ctx = new Context(h, segmentName, filter);
            for (String name : plan.all()) {
                boolean required = plan.required().contains(name);
                TransportFactory c = candidates.get(name);
                String why = required ? null : c.precheck().apply(protocol == null ? "" : protocol, filter);
                if (why != null) {
                    LOG.debug("transport {} not installed: {}", name, why);
                    skipped.add(name + ": " + why);
                    continue;
                }
                Transport t = c.create().get();
                try {
                    if (!t.name().equals(name) || !c.declaration().covers(t.capabilities())) {
                        throw new IllegalStateException(String.format(Locale.ROOT,
                                "transport %s (%s) does not match its declaration %s", t.name(), t.capabilities(),
                                c.declaration()));
                    }
                    t.install(ctx);
                    installed.add(t);
                } catch (TransportException | RuntimeException e) {
                    t.uninstall();
                    if (required) {
                        for (Transport done : installed.reversed()) {
                            done.uninstall();
                        }
                        return abandon(server, dir, "initialize(protocol \"" + protocol + "\"): " + e.getMessage());
                    }
                    LOG.info("transport {} not installed: {}", name, e.getMessage());
                    skipped.add(name + ": " + e.getMessage());
                }
            }
            if (installed.isEmpty()) {
                return abandon(server, dir, "initialize(protocol \"" + protocol + "\"): no transport could be installed: "
                        + String.join("; ", skipped));
            }
            Transport[] ts = installed.toArray(new Transport[0]);
            transports = ts;
            if (dir != null) {
                try {
                    dir.publish(localDescriptor(), h, server.port());
                } catch (io.mooncake4j.metadata.MetadataException e) {
                    transports = new Transport[0];
                    for (Transport done : installed.reversed()) {
                        done.uninstall();
                    }
                    return abandon(server, dir, "initialize: cannot publish the segment at " + metadataServer + ": "
                            + e.getMessage());
                }
                directory = dir;
                peers.useDirectory(dir);
            }
            router = new Router(ts, registry);
            lastError = null;
            LOG.info("Transfer Engine RPC using {}, listening on {}:{}; transports {}",
                    dir == null ? "P2P handshake" : "metadata server " + metadataServer, h, server.port(),
                    transportNames());
            return 0;
        }
    }

    /** Undoes a failed {@link #initialize} after the RPC port was bound. */
    private int abandon(HandshakeServer server, MetadataDirectory dir, String message) {
        server.close();
        rpc = null;
        segmentName = null;
        if (dir != null) {
            dir.close();
        }
        return fail(message);
    }

    /**
     * Re-publishes the descriptor in HTTP metadata mode after registrations changed (peers read the
     * buffers from it); 0, or {@link ErrorCodes#METADATA} (logged, and kept as {@link #lastError()})
     * when the store refuses. Called under the lifecycle lock.
     */
    private int republish() {
        MetadataDirectory d = directory;
        if (d == null || closed) {
            return 0;
        }
        try {
            d.publish(localDescriptor(), host, getRpcPort());
            return 0;
        } catch (io.mooncake4j.metadata.MetadataException e) {
            fail("cannot update segment " + segmentName + " at the metadata server: " + e.getMessage());
            return ErrorCodes.METADATA;
        }
    }

    private int fail(String message) {
        lastError = message;
        LOG.error(message);
        return -1;
    }

    /**
     * Why the last {@link #initialize} or registration failed, naming the cause and the fix: an
     * installed transport's own last error first ({@link Transport#lastError()}: rdma's registration
     * diagnosis), else the core's; null after a success.
     */
    public String lastError() {
        for (Transport t : transports) {
            String e = t.lastError();
            if (e != null) {
                return e;
            }
        }
        return lastError;
    }

    /** The installed transports' names, in the order selection tries them. */
    public List<String> transportNames() {
        List<String> out = new ArrayList<>();
        for (Transport t : transports) {
            out.add(t.name());
        }
        return out;
    }

    /** The installed transport named {@code name}, or null (transports' monitoring getters; tests). */
    @Override
    public Transport transport(String name) {
        for (Transport t : transports) {
            if (t.name().equals(name)) {
                return t;
            }
        }
        return null;
    }

    /**
     * Bytes handed to each installed transport so far, in selection order (a slice that fell back
     * counts for both transports); empty before {@link #initialize}.
     *
     * @return transport name to bytes
     */
    @Override
    public Map<String, Long> bytesByTransport() {
        Router r = router;
        Map<String, Long> out = new LinkedHashMap<>();
        Transport[] ts = transports;
        if (r != null && r.size() == ts.length) {
            for (int t = 0; t < ts.length; t++) {
                out.put(ts[t].name(), r.routedBytes(t));
            }
        }
        return out;
    }

    /** {@inheritDoc} Sums the handshake server's, the peer table's, the router's and every transport's. */
    @Override
    public EngineCounters counters() {
        HandshakeServer s = rpc;
        Router r = router;
        EngineCounters c = new EngineCounters(0, 0,
                s == null ? 0 : s.rejectedConnections(),
                s == null ? 0 : s.evictedConnections(),
                s == null ? 0 : s.expiredConnections(),
                peers.limitHits(), 0,
                r == null ? 0 : r.fallbacks(),
                r == null ? 0 : r.unroutable());
        for (Transport t : transports) {
            c = c.plus(t.counters());
        }
        return c;
    }

    /** Slices moved to another transport after a retryable failure, so far. */
    public long fallbackSlices() {
        Router r = router;
        return r == null ? 0 : r.fallbacks();
    }

    @Override
    public int getRpcPort() {
        HandshakeServer s = rpc;
        return s == null ? 0 : s.port();
    }

    @Override
    public String getLocalSegmentName() {
        return segmentName;
    }

    /** {@code host:rpcPort} without IPv6 brackets (Mooncake {@code getLocalIpAndPort}). */
    public String getLocalIpAndPort() {
        return host == null ? null : host + ":" + getRpcPort();
    }

    /**
     * What the descriptor advertises as Mooncake's {@code protocol}: the first installed transport,
     * in the core's order, that speaks a wire Mooncake's C++ engine speaks
     * ({@link io.mooncake4j.engine.spi.TransportCapabilities#mooncakeWire()}: rdma before tcp), else
     * the first installed transport's name; null before initialisation.
     */
    @Override
    public String protocol() {
        Transport[] ts = transports;
        if (ts.length == 0) {
            return null;
        }
        for (Transport t : ts) {
            if (t.capabilities().mooncakeWire()) {
                return t.name();
            }
        }
        return ts[0].name();
    }

    @Override
    public void close() {
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            closed = true;
        }
        // nothing new is posted; the transports drain or cut what is in flight, and only then are the
        // tasks failed, so a caller woken by the failure finds no transport touching its memory
        for (TaskBatch b : batches.all()) {
            b.aborted = true;
        }
        peers.close();
        MetadataDirectory dir = directory;
        if (dir != null) {
            try {
                dir.withdraw(segmentName);
            } catch (io.mooncake4j.metadata.MetadataException e) {
                LOG.error("cannot withdraw segment {} from the metadata server: {}", segmentName, e.getMessage());
            } finally {
                dir.close();
            }
        }
        HandshakeServer r = rpc;
        if (r != null) {
            r.close();
        }
        Transport[] ts = transports;
        for (int i = ts.length - 1; i >= 0; i--) {
            try {
                ts[i].uninstall();
            } catch (RuntimeException e) {
                LOG.error("transport {} failed to uninstall", ts[i].name(), e);
            }
        }
        for (TaskBatch b : batches.all()) {
            b.failAll(TaskBatch.FAILED);
        }
        if (segmentName != null) {
            LOG.info("transfer engine {} closed", segmentName);
        }
    }

    // ------------------------------------------------------------------ handshake port

    private String handle(int type, Object request) {
        java.util.function.Function<Object, String> h = type == HandshakeFrame.CONNECTION ? null : handlers.get(type);
        return h != null ? h.apply(request) : handshakes.handle(type, request);
    }

    private String onConnection(Object request) {
        java.util.function.Function<Object, String> h = handlers.get(HandshakeFrame.CONNECTION);
        return h == null ? CONNECTION_REPLY : h.apply(request);
    }

    /** Mooncake's TCP transport answers a Connection request with an empty handshake descriptor. */
    private static String emptyHandshakeDesc() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("local_gid", "");
        m.put("local_lid", 0L);
        m.put("local_nic_path", "");
        m.put("payload", "");
        m.put("peer_nic_path", "");
        m.put("qp_num", List.of());
        m.put("reply_msg", "");
        return io.mooncake4j.internal.json.Json.write(m, true) + "\n";
    }

    /**
     * A notification received through the handshake port (Notify, type 2).
     *
     * @param name    the sender's name field
     * @param message the notification text
     */
    public record Notify(String name, String message) {}

    /** Drains the notifications received so far (Mooncake {@code getNotifies}). */
    public List<Notify> getNotifies() {
        return handshakes.drainNotifies(Notify::new);
    }

    /** Sends a Notify to a peer; 0 or a negative {@link ErrorCodes} value. */
    public int sendNotify(String targetSession, String name, String message) {
        try {
            client.notify(PeerAddress.parse(targetSession, settings.handshake().defaultPort()), name, message);
            return 0;
        } catch (HandshakeException e) {
            LOG.warn("notify to {} failed: {}", targetSession, e.getMessage());
            return e.errorCode();
        }
    }

    /** Probes a peer's handshake port; 0 or a negative {@link ErrorCodes} value. */
    public int sendProbe(String targetSession) {
        try {
            client.probe(PeerAddress.parse(targetSession, settings.handshake().defaultPort()));
            return 0;
        } catch (HandshakeException e) {
            LOG.warn("probe of {} failed: {}", targetSession, e.getMessage());
            return e.errorCode();
        }
    }

    /** The descriptor this engine serves to Metadata requests, built from the transports' contributions. */
    public SegmentDescriptor localDescriptor() {
        Descriptors.Builder b = new Descriptors.Builder(segmentName == null ? "" : segmentName, registry.snapshot());
        for (Transport t : transports) {
            t.describe(b);
        }
        return b.build();
    }

    /** What the core gives its transports. */
    private final class Context implements io.mooncake4j.engine.spi.TransportContext {
        private final String hostname;
        private final String segment;
        private final String filter;
        private final java.util.concurrent.atomic.AtomicInteger threadSerial =
                new java.util.concurrent.atomic.AtomicInteger();

        Context(String hostname, String segment, String filter) {
            this.hostname = hostname;
            this.segment = segment;
            this.filter = filter;
        }

        @Override
        public String hostname() {
            return hostname;
        }

        @Override
        public String segmentName() {
            return segment;
        }

        @Override
        public String deviceFilter() {
            return filter;
        }

        @Override
        public String machineId() {
            return io.mooncake4j.engine.spi.MachineIdentity.local();
        }

        @Override
        public List<LocalBuffer> registeredBuffers() {
            List<LocalBuffer> out = new ArrayList<>();
            for (BufferRegistry.Buffer b : registry.snapshot()) {
                out.add(LocalBuffer.of(b.address(), b.length(), b.location()));
            }
            return out;
        }

        @Override
        public java.util.concurrent.ThreadFactory threads(String component) {
            return r -> Thread.ofPlatform().daemon(true)
                    .name("mooncake-" + component + "-" + threadSerial.getAndIncrement()).unstarted(r);
        }

        @Override
        public void serveHandshake(int type, java.util.function.Function<Object, String> handler) {
            if (handlers.putIfAbsent(type, handler) != null) {
                throw new IllegalStateException("handshake type " + type + " is already served");
            }
        }

        @Override
        public String handshake(String peer, int type, String body) throws HandshakeException {
            return client.send(PeerAddress.parse(peer, settings.handshake().defaultPort()),
                    new HandshakeFrame(type, body)).json();
        }
    }

    // ------------------------------------------------------------------ memory

    /**
     * {@inheritDoc}
     *
     * <p>{@code "*"} is resolved as Mooncake does: memory a transport recognises as device memory
     * is registered as {@code cuda:N}, anything else stays {@code "*"} (host memory). Every
     * installed transport registers the buffer, or none keeps it.
     */
    @Override
    public int registerMemory(long address, long length, String location) {
        return register(new long[] {address}, new long[] {length},
                new String[] {location == null ? MemoryLocation.WILDCARD : location});
    }

    /** Registers with location {@code "*"}, resolved per buffer (see {@link #registerMemory}). */
    @Override
    public int batchRegisterMemory(long[] addresses, long[] lengths) {
        if (addresses == null || lengths == null || addresses.length != lengths.length) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        String[] locs = new String[addresses.length];
        Arrays.fill(locs, MemoryLocation.WILDCARD);
        return register(addresses, lengths, locs);
    }

    private int register(long[] addresses, long[] lengths, String[] locs) {
        synchronized (lifecycle) {
            Transport[] ts = transports;
            if (closed || router == null) {
                lastError = "registerMemory: the engine is " + (closed ? "closed" : "not initialized");
                return ErrorCodes.INVALID_ARGUMENT;
            }
            for (int i = 0; i < locs.length; i++) {
                if (MemoryLocation.WILDCARD.equals(locs[i])) {
                    for (Transport t : ts) {
                        String d = t.detectLocation(addresses[i]);
                        if (d != null) {
                            locs[i] = d;
                            break;
                        }
                    }
                }
            }
            int rc = registry.registerBatch(addresses, lengths, locs);
            if (rc != 0) {
                return rc;
            }
            List<LocalBuffer> bufs = new ArrayList<>(addresses.length);
            for (int i = 0; i < addresses.length; i++) {
                bufs.add(LocalBuffer.of(addresses[i], lengths[i], locs[i]));
            }
            for (int k = 0; k < ts.length; k++) {
                rc = ts[k].registerBuffers(bufs);
                if (rc != 0) {
                    LOG.error("registerMemory: transport {} refused {} buffer(s) at 0x{}: {}", ts[k].name(),
                            bufs.size(), Long.toHexString(addresses[0]), rc);
                    for (int j = k - 1; j >= 0; j--) {
                        ts[j].unregisterBuffers(bufs);
                    }
                    for (long a : addresses) {
                        registry.unregister(a);
                    }
                    return rc;
                }
            }
            return republish();
        }
    }

    /**
     * The best answer of the installed transports (direct, then staged, then unsupported with the
     * first transport's reason); {@link DeviceMemoryAccess.Kind#UNKNOWN} before initialisation.
     */
    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        DeviceMemoryAccess best = DeviceMemoryAccess.unknown();
        for (Transport t : transports) {
            DeviceMemoryAccess a = t.deviceMemoryAccess(location);
            if (rank(a.kind()) > rank(best.kind())) {
                best = a;
            }
        }
        return best;
    }

    private static int rank(DeviceMemoryAccess.Kind k) {
        return switch (k) {
            case UNKNOWN -> 0;
            case UNSUPPORTED -> 1;
            case STAGED -> 2;
            case DIRECT -> 3;
        };
    }

    @Override
    public int unregisterMemory(long address) {
        return batchUnregisterMemory(new long[] {address});
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        if (addresses == null) {
            return ErrorCodes.INVALID_ARGUMENT;
        }
        synchronized (lifecycle) {
            List<LocalBuffer> bufs = new ArrayList<>(addresses.length);
            int rc = 0;
            Set<Long> seen = new LinkedHashSet<>();
            for (long a : addresses) {
                BufferRegistry.Buffer b = registry.byBase(a);
                if (b == null) {
                    rc = ErrorCodes.ADDRESS_NOT_REGISTERED;
                } else if (seen.add(a)) {
                    bufs.add(LocalBuffer.of(b.address(), b.length(), b.location()));
                }
            }
            if (bufs.isEmpty()) {
                return rc;
            }
            for (Transport t : transports) {
                t.unregisterBuffers(bufs);
            }
            Router r = router;
            var lock = r == null ? null : r.localCopies.writeLock();
            if (lock != null) {
                lock.lock();
            }
            try {
                for (LocalBuffer b : bufs) {
                    registry.unregister(b.address());
                }
            } finally {
                if (lock != null) {
                    lock.unlock();
                }
            }
            int published = republish();
            return rc != 0 ? rc : published;
        }
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
        return peers.open(n);
    }

    /** Opens {@code name} (fetching its descriptor) and answers whether it resolved to this engine's own segment. */
    @Override
    public boolean isOwnSegment(String name) {
        return openSegment(name) == 0;
    }

    /** Whether the peer opened as {@code name} was last found to be this engine itself, as it connected or refreshed. */
    @Override
    public boolean refusedAsOwnSegment(String name) {
        String n = EngineCalls.normalizedSegmentName(name);
        if (n == null) {
            return false;
        }
        CorePeer p = peers.opened(n);
        return p != null && p.ownEngineFound();
    }

    /** {@code buffers[0].addr} of the (cached) descriptor of {@code name}; -1 if it cannot be opened or has none. */
    @Override
    public long getFirstBufferAddress(String name) {
        long id = openSegment(name);
        if (id < 0) {
            return -1;
        }
        CorePeer p = id == 0 ? null : peers.get(id);
        List<SegmentDescriptor.Buffer> buffers = p == null ? localDescriptor().buffers() : p.descriptor().buffers();
        return buffers.isEmpty() ? -1 : buffers.get(0).addr();
    }

    /** Descriptor fetches in flight now (tests). */
    public int openingsInFlight() {
        return peers.openingsInFlight();
    }

    private void forgetEverywhere(CorePeer p) {
        for (Transport t : transports) {
            t.forget(p);
        }
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

    /** Fails what is left of {@code b} and waits until no transport touches its memory. */
    void abort(TaskBatch b) {
        b.aborted = true;
        b.failAll(TaskBatch.TIMEOUT);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (Transport t : transports) {
            t.evict(b, deadline);
        }
    }

    private static final int READ = TransferRequest.Opcode.READ.wire();
    private static final int WRITE = TransferRequest.Opcode.WRITE.wire();

    /**
     * Appends and starts tasks. {@code ops}/{@code targets} may be null, then {@code opAll}/
     * {@code targetAll} apply to every task.
     */
    int submit(TaskBatch b, int n, int[] ops, int opAll, long[] targets, long targetAll, long[] local,
            long[] remote, long[] lens) {
        Router r = router;
        if (closed || r == null) {
            return StatusCodes.INVALID_ARGUMENT;
        }
        int first;
        synchronized (b) {
            if (b.size() + n > b.capacity) {
                return StatusCodes.TOO_MANY_REQUESTS;
            }
            long checked = 0; // the target last found known and reachable (0: none yet; 0 is the own segment)
            for (int i = 0; i < n; i++) {
                long t = targets == null ? targetAll : targets[i];
                int op = ops == null ? opAll : ops[i];
                if (op != READ && op != WRITE || lens[i] < 0) {
                    return StatusCodes.INVALID_ARGUMENT;
                }
                if (t != 0 && t != checked) {
                    CorePeer p = peers.get(t);
                    if (p == null) {
                        return StatusCodes.INVALID_ARGUMENT;
                    }
                    if (!r.reachable(p)) {
                        return StatusCodes.NOT_SUPPORTED_TRANSPORT;
                    }
                    checked = t;
                }
            }
            first = b.size();
            for (int i = 0; i < n; i++) {
                b.append(ops == null ? opAll : ops[i], local[i], targets == null ? targetAll : targets[i], remote[i],
                        lens[i]);
            }
        }
        // local copies and empty tasks first; remote tasks grouped per target
        long single = -1;
        int remoteCount = 0;
        for (int k = 0; k < n; k++) {
            int i = first + k;
            long t = b.target[i];
            if (b.length[i] == 0) {
                b.finish(i, TaskBatch.COMPLETED);
            } else if (t == 0) {
                b.finish(i, r.copyLocal(b, i) ? TaskBatch.COMPLETED : TaskBatch.FAILED);
            } else {
                remoteCount++;
                single = single == -1 || single == t ? t : -2;
            }
        }
        if (remoteCount == 0) {
            return StatusCodes.OK;
        }
        if (single >= 0 && remoteCount == n) {
            r.route(b, peers.get(single), first, n, null);
            return StatusCodes.OK;
        }
        Map<Long, int[]> perTarget = new LinkedHashMap<>();
        Map<Long, Integer> counts = new LinkedHashMap<>();
        for (int k = 0; k < n; k++) {
            int i = first + k;
            if (b.target[i] != 0 && b.length[i] != 0) {
                counts.merge(b.target[i], 1, Integer::sum);
            }
        }
        for (Map.Entry<Long, Integer> e : counts.entrySet()) {
            perTarget.put(e.getKey(), new int[e.getValue()]);
        }
        Map<Long, Integer> fill = new LinkedHashMap<>();
        for (int k = 0; k < n; k++) {
            int i = first + k;
            long t = b.target[i];
            if (t != 0 && b.length[i] != 0) {
                int j = fill.merge(t, 1, Integer::sum) - 1;
                perTarget.get(t)[j] = i;
            }
        }
        for (Map.Entry<Long, int[]> e : perTarget.entrySet()) {
            r.route(b, peers.get(e.getKey()), 0, e.getValue().length, e.getValue());
        }
        return StatusCodes.OK;
    }
}
