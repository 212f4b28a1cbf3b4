package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.handshake.HandShakeDesc;
import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.PortAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import io.mooncake4j.engine.spi.DescriptorContribution;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceGroup;
import io.mooncake4j.engine.spi.Transport;
import io.mooncake4j.engine.spi.TransportCapabilities;
import io.mooncake4j.engine.spi.TransportContext;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportHost;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code rdma} transport over libibverbs (through {@link RdmaProvider}; the verbs bindings are
 * reached from this package only), wire-compatible with Mooncake's RDMA transport: it contributes
 * {@code devices}, per-device {@code rkey}/{@code lkey} and {@code priority_matrix} to the segment
 * descriptor, serves Connection requests ({@code HandShakeDesc}: NIC paths, LID/GID, QP numbers,
 * {@code ready_ack}) and wires endpoints of {@code MC_NUM_QP_PER_EP} RC QPs.
 *
 * <ul>
 *   <li>{@link #install} opens every device the {@code device_name} filter keeps, checks the port
 *       is ACTIVE, picks the GID ({@code MC_GID_INDEX} or the automatic ranking), creates one CQ
 *       and one poller thread per device. Without RDMA (no devices, ENOSYS, no libibverbs) it
 *       throws with the diagnosis.</li>
 *   <li>Registration pins each buffer on every device, after comparing bytes × devices with
 *       {@code RLIMIT_MEMLOCK} ({@link MemlockCheck}).</li>
 *   <li>Slices are cut into {@code MC_SLICE_SIZE} work requests (a tail up to the fragment limit
 *       stays whole), spread over the preferred local and peer NICs, posted in chains per QP from
 *       reusable work-request arrays, every work request signalled. A failed one is retried on
 *       another path (next local NIC, next peer NIC, fresh endpoint) until {@code MC_RETRY_CNT}
 *       attempts; then the slice fails, {@link io.mooncake4j.engine.spi.SliceFailure#UNREACHABLE}
 *       when no endpoint could be brought up, and the core moves it to the next transport.</li>
 *   <li>Transfers to the own segment are the core's (one copy), not this transport's.</li>
 * </ul>
 *
 * <p>Threads: per device {@code mooncake-rdma-poller-N} and {@code mooncake-rdma-events-N},
 * short-lived platform {@code mooncake-rdma-connect-N} threads for active handshakes and
 * {@code mooncake-rdma-control-N} for passive ones (see the package documentation); all stop in
 * {@link #uninstall()}, which first drains outstanding work and then destroys QPs, CQs, MRs, PDs and
 * contexts in that order. Posting is not confined to one thread per QP: submitting threads and the
 * poller post under the endpoint's lock; each CQ is owned by its poller.
 *
 * <p>One file over 800 lines, kept whole on purpose: endpoint bring-up, slice posting and completion
 * handling are one state machine over one slice. A slice that fails on any of them (a handshake that
 * breaks an endpoint, a post that finds it broken, an error completion) goes through the same
 * {@code redispatch} / {@code nextAttempt} / {@code finishSlice} path under the same retry budget, and
 * uninstall drains all three in one teardown order; they share the contexts, the slice pool and the
 * endpoint maps. Split by concern, each part would need the others' private state and the retry
 * rules would be spread over three classes. What is separable already lives beside it: registered
 * memory ({@link RdmaMemory}), an endpoint's QPs ({@link RdmaEndpoint}, {@link QpBringUp}), a device
 * ({@link RdmaContext}), NIC choice ({@link NicSelection}), a batch's slices ({@link RdmaBatch},
 * {@link Slice}).
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code mooncake-transfer-engine/src/transport/rdma_transport/rdma_transport.cpp} ({@code RdmaTransport})
 */
public final class RdmaTransport implements Transport {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaTransport.class);
    private static final AtomicInteger CONNECTORS = new AtomicInteger();
    private static final TransportCapabilities CAPABILITIES = new TransportCapabilities(
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), Set.of(MemoryKind.HOST, MemoryKind.CUDA), false, true, true);

    private final RdmaProvider provider;
    private final GpuDirectSupport gpu;
    private final RdmaEngineConfig config;
    /** The {@code MC_*} settings, clamped to the devices' limits at {@link #install}. */
    private volatile RdmaSettings settings;
    private final Supplier<Optional<RdmaAvailability.Cause>> availability;
    /** The registered memory and its regions on every device; read lock-free by the data path. */
    private final RdmaMemory memory;
    private final Slice.Pool slices = new Slice.Pool();
    private final AtomicInteger seeds = new AtomicInteger();
    /** Flattened peer descriptors, by the core's segment id; rebuilt when the descriptor changes. */
    private final Map<Long, PeerSegment> peers = new ConcurrentHashMap<>();
    private final Set<RdmaBatch> active = ConcurrentHashMap.newKeySet();
    private final Set<Thread> connectors = ConcurrentHashMap.newKeySet();
    /** Platform threads for passive connection bring-up (blocking verbs calls), at most 8, idle ones end after 30 s. */
    private final java.util.concurrent.ThreadPoolExecutor controlPath = controlPathExecutor();
    private final AtomicLong failedCompletions = new AtomicLong();
    private final AtomicLong retriedSlices = new AtomicLong();

    private volatile TransportContext context;
    private volatile RdmaContext[] contexts = new RdmaContext[0];
    private volatile AsyncEventMonitor asyncEvents;
    private volatile Map<String, List<List<String>>> priorityMatrix = Map.of();
    private volatile String lastError;
    private volatile boolean closed;

    /** A transport over libibverbs configured from the process environment snapshot. */
    public RdmaTransport() {
        this(new VerbsRdmaProvider(), RdmaEngineConfig.fromSettings(EngineSettings.fromEnvironment()),
                RdmaAvailability::unavailabilityCause, GpuDirectSupport.cuda());
    }

    /**
     * @param availability why RDMA cannot run here (empty when it can); checked by {@link #install}
     * @param gpu          how GPU memory ({@code cuda:N}) is found and exported for GPUDirect
     *                     registration ({@link GpuDirectSupport#cuda()} in production)
     */
    public RdmaTransport(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability, GpuDirectSupport gpu) {
        this.gpu = Objects.requireNonNull(gpu, "gpu");
        this.provider = provider;
        this.config = config;
        this.settings = config.settings();
        this.availability = availability;
        this.memory = new RdmaMemory(gpu, new GpuDirectRegistration(provider, gpu, config.sysfsRoot()), config,
                this::fail);
    }

    private static java.util.concurrent.ThreadPoolExecutor controlPathExecutor() {
        AtomicInteger n = new AtomicInteger();
        java.util.concurrent.ThreadPoolExecutor ex = new java.util.concurrent.ThreadPoolExecutor(8, 8, 30,
                TimeUnit.SECONDS, new java.util.concurrent.LinkedBlockingQueue<>(),
                r -> Thread.ofPlatform().daemon(true).name("mooncake-rdma-control-" + n.getAndIncrement()).unstarted(r));
        ex.allowCoreThreadTimeOut(true);
        return ex;
    }

    /**
     * Whether the core should try rdma for {@code protocol} with {@code deviceFilter}: always when
     * asked for by name (install then diagnoses); for {@code "auto"}/{@code ""} only where a device
     * is usable and {@code MC_FORCE_TCP} is unset ({@link ProtocolSelection}, one WARN otherwise).
     *
     * @param forceTcp {@link RdmaEngineConfig#forceTcp()}
     * @return null to try it, else why not
     */
    public static String autoPrecheck(String protocol, String deviceFilter, boolean forceTcp) {
        String p = protocol == null ? "" : protocol.strip().toLowerCase(Locale.ROOT);
        if (!p.isEmpty() && !p.equals("auto")) {
            return null;
        }
        try {
            return ProtocolSelection.resolve("auto", deviceFilter, forceTcp).equals(ProtocolSelection.RDMA) ? null
                    : "no usable RDMA device (or MC_FORCE_TCP is set)";
        } catch (TransferEngineException e) {
            return e.getMessage();
        }
    }

    /** The transport's name ({@code MC_TRANSPORTS}, logs). */
    public static final String NAME = "rdma";

    /** Its declaration: host and GPU memory (GPUDirect); after the same-machine transports, before tcp. */
    public static final TransportDeclaration DECLARATION = new TransportDeclaration(NAME,
            Set.of(MemoryKind.HOST, MemoryKind.CUDA), 30, true, false);

    /** The factory of rdma transports over libibverbs with {@code config} (auto precheck). */
    public static TransportFactory factory(RdmaEngineConfig config) {
        return new TransportFactory(DECLARATION, () -> new RdmaTransport(new VerbsRdmaProvider(), config,
                RdmaAvailability::unavailabilityCause, GpuDirectSupport.cuda()),
                (protocol, filter) -> autoPrecheck(protocol, filter, config.forceTcp()));
    }

    /**
     * The factory of rdma transports over {@code provider} (no precheck: a required rdma diagnoses
     * itself at install through {@code availability}).
     */
    public static TransportFactory factory(RdmaProvider provider, RdmaEngineConfig config,
            Supplier<Optional<RdmaAvailability.Cause>> availability, GpuDirectSupport gpu) {
        return new TransportFactory(DECLARATION, () -> new RdmaTransport(provider, config, availability, gpu));
    }

    /**
     * The rdma transport installed in {@code engine} (for its monitoring getters), or null: the
     * engine is not initialised, has no rdma, or is not the engine core.
     */
    public static RdmaTransport in(TransferEngine engine) {
        return engine instanceof TransportHost h && h.transport(NAME) instanceof RdmaTransport t ? t : null;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public TransportCapabilities capabilities() {
        return CAPABILITIES;
    }

    // ------------------------------------------------------------------ lifecycle

    @Override
    public void install(TransportContext ctx) throws TransportException {
        Optional<RdmaAvailability.Cause> cause = availability.get();
        if (cause.isPresent()) {
            throw new TransportException(cause.get().message());
        }
        List<Device> opened = new ArrayList<>();
        List<RdmaContext> ctxs = new ArrayList<>();
        try {
            List<String> names = NicSelection.whitelist(NicSelection.filter(provider.deviceNames(),
                    ctx.deviceFilter()), config.topology().deviceFilter());
            String name = ctx.segmentName();
            for (String n : names) {
                opened.add(provider.open(n));
            }
            RdmaSettings clamped = settings;
            for (Device d : opened) {
                clamped = clamp(clamped, d.attributes());
            }
            if (!clamped.equals(settings)) {
                LOG.info("RDMA settings clamped to the device limits: {}", clamped);
            }
            settings = clamped;
            for (Device d : opened) {
                ctxs.add(openContext(ctxs.size(), d, name));
            }
            Map<String, List<List<String>>> matrix = new LinkedHashMap<>();
            for (Map.Entry<String, NicSelection.Preference> e : topology(names).entrySet()) {
                matrix.put(e.getKey(), List.of(e.getValue().preferred(), e.getValue().available()));
            }
            this.priorityMatrix = Map.copyOf(matrix);
            this.contexts = ctxs.toArray(new RdmaContext[0]);
            ctx.serveHandshake(HandshakeFrame.CONNECTION,
                    request -> offCarrier(() -> onConnection(HandShakeDesc.fromJson(request))).toJson());
        } catch (RuntimeException e) {
            for (RdmaContext c : ctxs) {
                c.closeQueues();
            }
            for (Device d : opened) {
                d.close();
            }
            contexts = new RdmaContext[0];
            throw new TransportException(e.getMessage() == null ? e.toString() : e.getMessage());
        }
        this.context = ctx;
        for (RdmaContext c : contexts) { // pollers on their NIC's NUMA node, as Mooncake's bindToSocket
            for (NicSelection.Nic n : NicSelection.discover(List.of(c.name), config.sysfsRoot())) {
                c.placePoller(n.numaNode(), NicSelection.nodeCpus(config.sysfsRoot(), n.numaNode()));
            }
            c.start();
        }
        asyncEvents = new AsyncEventMonitor(contexts, settings.ibPort(), this::contextFailed);
        asyncEvents.start();
        LOG.info("RDMA transport: {} device(s) {}, {} QPs per endpoint, slice {} B, retry count {}",
                contexts.length, Arrays.stream(contexts).map(c -> c.name + " (GID index " + c.gidIndex + ")")
                        .toList(), settings.numQpPerEp(), settings.sliceSize(), settings.retryCnt());
        LOG.info("RDMA topology: priority matrix {}", priorityMatrix);
        List<LocalBuffer> already = ctx.registeredBuffers();
        if (!already.isEmpty() && registerBuffers(already) != 0) {
            uninstall();
            throw new TransportException("cannot register the buffers registered so far: " + lastError);
        }
    }

    /** The priority matrix ({@link NicSelection#priorityMatrix}), GPUs' bus ids from {@link GpuDirectSupport}. */
    private Map<String, NicSelection.Preference> topology(List<String> names) {
        List<String> busIds = new ArrayList<>();
        for (int g = 0, n = gpu.deviceCount(); g < n; g++) {
            busIds.add(gpu.pciBusId(g).orElse(null));
        }
        return NicSelection.priorityMatrix(names, config.sysfsRoot(), config.topology().customTopology(), busIds);
    }

    private RdmaContext openContext(int index, Device d, String segment) {
        PortAttributes port = d.port(settings.ibPort());
        if (!port.isActive()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "port %d of %s is not ACTIVE (state %d); check the link (ibv_devinfo -d %s) or set MC_IB_PORT",
                    settings.ibPort(), d.name(), port.state(), d.name()));
        }
        int gidIndex = settings.gidIndex();
        if (settings.autoGid()) {
            gidIndex = GidSelection.best(GidSelection.probe(d, settings.ibPort(), port.gidTblLen(),
                    config.sysfsRoot())).map(GidSelection.Choice::index).orElseThrow(() -> new TransferEngineException(
                    "no usable GID on " + d.name() + " port " + settings.ibPort()
                            + "; set MC_GID_INDEX (show_gids lists the table)"));
        }
        Gid gid = d.gid(settings.ibPort(), gidIndex);
        if (gid.isNull()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "GID index %d of %s port %d is empty; set MC_GID_INDEX to a populated entry (show_gids)",
                    gidIndex, d.name(), settings.ibPort()));
        }
        return new RdmaContext(index, d, port.lid(), gid, gidIndex, port.activeMtu(), settings.maxCqePerCtx(),
                HandShakeDesc.nicPath(segment, d.name()), this);
    }

    /** Mooncake's {@code updateGlobalConfig}: QP depth, SGEs, CQ size, endpoints and MR size within the device's limits. */
    static RdmaSettings clamp(RdmaSettings s, io.mooncake4j.engine.rdma.verbs.DeviceAttributes a) {
        int maxWr = a.maxQpWr() > 0 ? Math.min(s.maxWr(), a.maxQpWr()) : s.maxWr();
        int maxSge = a.maxSge() > 0 ? Math.min(s.maxSge(), a.maxSge()) : s.maxSge();
        int maxCqe = a.maxCqe() > 0 ? Math.min(s.maxCqePerCtx(), a.maxCqe()) : s.maxCqePerCtx();
        int maxEp = a.maxQp() > 0 ? Math.min(s.maxEpPerCtx(), Math.max(1, a.maxQp() / s.numQpPerEp())) : s.maxEpPerCtx();
        long maxMr = a.maxMrSize() > 0 ? Math.min(s.maxMrSize(), a.maxMrSize()) : s.maxMrSize();
        return new RdmaSettings(s.sliceSize(), s.fragmentLimit(), s.retryCnt(), s.numQpPerEp(), maxWr, maxSge,
                s.maxInline(), maxCqe, maxEp, s.ibPort(), s.gidIndex(), s.autoGidMaxRetries(), s.pkeyIndex(),
                s.mtuBytes(), s.trafficClass(), s.serviceLevel(), maxMr, s.relaxedOrdering());
    }

    /** The settings in use (after clamping). */
    RdmaSettings settings() {
        return settings;
    }

    /**
     * The last registration error in words that name the cause and the fix, or null.
     * {@code bench --protocol rdma} prints it (through the core's {@code lastError}).
     */
    @Override
    public String lastError() {
        return lastError;
    }

    private void fail(String message) {
        lastError = message;
        LOG.error(message);
    }

    /** Names of the open devices, in descriptor order. */
    public List<String> devices() {
        return Arrays.stream(contexts).map(c -> c.name).toList();
    }

    /** Asynchronous device events received so far (monitoring and tests). */
    public long asyncEvents() {
        AsyncEventMonitor m = asyncEvents;
        return m == null ? 0 : m.events();
    }

    /** Port-down events on the engine's port so far (monitoring and tests). */
    public long portDownEvents() {
        AsyncEventMonitor m = asyncEvents;
        return m == null ? 0 : m.portDownEvents();
    }

    /** Devices out of NIC selection after a port or device failure event (monitoring and tests). */
    public List<String> inactiveDevices() {
        return Arrays.stream(contexts).filter(c -> !c.isActive()).map(c -> c.name).toList();
    }

    /** The asynchronous-event reader threads (tests). */
    List<Thread> asyncEventThreads() {
        AsyncEventMonitor m = asyncEvents;
        return m == null ? List.of() : m.threads();
    }

    /** Completions that reported an error so far (monitoring and tests). */
    public long failedCompletions() {
        return failedCompletions.get();
    }

    /** Slices re-dispatched after a failure so far (monitoring and tests). */
    public long retriedSlices() {
        return retriedSlices.get();
    }

    /** Endpoints currently mapped, over all devices (tests). */
    int endpointCount() {
        int n = 0;
        for (RdmaContext c : contexts) {
            n += c.endpointCount();
        }
        return n;
    }

    /** The endpoints currently mapped, over all devices (tests). */
    List<RdmaEndpoint> endpoints() {
        List<RdmaEndpoint> out = new ArrayList<>();
        for (RdmaContext c : contexts) {
            out.addAll(c.endpoints());
        }
        return out;
    }

    /** The poller threads (tests). */
    List<Thread> pollerThreads() {
        return Arrays.stream(contexts).map(RdmaContext::pollerThread).toList();
    }

    /** Slices held (queued or in flight) (tests). */
    int liveSlices() {
        return slices.live();
    }

    @Override
    public void uninstall() {
        if (closed) {
            return;
        }
        closed = true;
        // 1. nothing new is posted; let what is in flight finish, then flush what does not
        for (RdmaBatch b : active) {
            b.abandoned = true;
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1); // on a NIC: microseconds
        if (!quiet(deadline)) {
            for (RdmaContext c : contexts) {
                for (RdmaEndpoint e : c.endpoints()) {
                    redispatch(e.breakDown());
                }
            }
            if (!quiet(System.nanoTime() + TimeUnit.SECONDS.toNanos(30))) {
                LOG.error("close: work requests still outstanding after 30 s; tearing down anyway");
            }
        }
        for (Thread t : connectors) {
            try {
                t.join(java.time.Duration.ofSeconds(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        // 2. event readers and pollers stop, then QPs -> CQs -> MRs -> PD -> context per device
        AsyncEventMonitor events = asyncEvents;
        if (events != null) {
            events.close();
        }
        controlPath.shutdown();
        boolean[] stopped = new boolean[contexts.length];
        for (RdmaContext c : contexts) {
            stopped[c.index] = c.stopPoller();
        }
        for (RdmaContext c : contexts) {
            if (!stopped[c.index]) {
                LOG.error("{}: its poller is still running; its QPs, CQ and device are left open (leaked) rather than"
                        + " destroyed under a running ibv_poll_cq", c.name);
                continue;
            }
            for (RdmaEndpoint e : c.endpoints()) {
                for (Slice s : e.drainQueue()) {
                    abandon(s);
                }
            }
            c.closeQueues();
        }
        memory.releaseAll();
        for (RdmaContext c : contexts) {
            if (!stopped[c.index]) {
                continue;
            }
            try {
                c.device.close();
            } catch (RuntimeException e) {
                LOG.warn("closing {} failed: {}", c.name, e.getMessage());
            }
        }
    }

    private boolean quiet(long deadline) {
        while (true) {
            int out = 0;
            for (RdmaContext c : contexts) {
                out += c.cqOutstanding();
            }
            if (out == 0) {
                return true;
            }
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(this, 200_000L);
        }
    }

    // ------------------------------------------------------------------ handshake

    /**
     * Runs {@code call} (which makes blocking verbs downcalls: QP creation, INIT/RTR/RTS) on a
     * platform thread when the caller is a virtual thread (the handshake server's handlers are), so
     * that a burst of connection requests cannot pin every carrier thread; the virtual caller
     * unmounts while it waits.
     */
    private <T> T offCarrier(java.util.concurrent.Callable<T> call) {
        if (!Thread.currentThread().isVirtual()) {
            try {
                return call.call();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new TransferEngineException(e.getMessage(), e);
            }
        }
        try {
            return controlPath.submit(call).get();
        } catch (java.util.concurrent.RejectedExecutionException e) {
            throw new TransferEngineException("engine is closing", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransferEngineException("interrupted", e);
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new TransferEngineException(String.valueOf(
                    e.getCause()), e.getCause());
        }
    }

    /** The passive side of a Connection (spec §5.4). */
    HandShakeDesc onConnection(HandShakeDesc req) {
        if (closed) {
            return HandShakeDesc.rejection("engine is closing");
        }
        RdmaContext ctx = null;
        String dev = HandShakeDesc.deviceOf(req.peerNicPath());
        for (RdmaContext c : contexts) {
            if (c.name.equals(dev)) {
                ctx = c;
            }
        }
        if (ctx == null) {
            return HandShakeDesc.rejection("Local RDMA context not found for " + req.peerNicPath());
        }
        if (!ctx.isActive() && !Boolean.TRUE.equals(req.readyAck())) {
            return HandShakeDesc.rejection("RDMA device " + ctx.name + " is not active (port down or device failure)");
        }
        if (Boolean.TRUE.equals(req.readyAck())) {
            RdmaEndpoint e = ctx.endpoint(req.localNicPath());
            if (e == null || !req.qpNums().equals(e.peerQpNums())) {
                return HandShakeDesc.rejection("ready-ACK for an unknown connection from " + req.localNicPath());
            }
            e.markState(RdmaEndpoint.CONNECTED);
            pump(e);
            return HandShakeDesc.empty();
        }
        if (!req.peerNicPath().equals(ctx.nicPath)) {
            return HandShakeDesc.rejection(String.format(Locale.ROOT,
                    "peer nic path inconsistency: request names %s, this NIC is %s", req.peerNicPath(), ctx.nicPath));
        }
        Gid peerGid;
        try {
            peerGid = Gid.parse(req.localGid());
        } catch (RuntimeException e) {
            return HandShakeDesc.rejection("bad local_gid '" + req.localGid() + "'");
        }
        RdmaEndpoint e = ctx.endpoint(req.localNicPath());
        try {
            if (e != null) {
                List<Long> cur = e.peerQpNums();
                if (cur != null && !cur.equals(req.qpNums())) { // the peer restarted: fresh QPs
                    redispatch(e.breakDown());
                    e = null;
                }
            }
            if (e == null) {
                final RdmaContext c = ctx;
                boolean[] created = new boolean[1];
                e = ctx.endpointOrCreate(req.localNicPath(), p -> new RdmaEndpoint(c, p, settings), created);
            }
            if (!e.bringUp(peerGid, req.localLid(), req.qpNums(), settings)) {
                return HandShakeDesc.rejection("endpoint " + e + " is connected to other QPs");
            }
        } catch (RuntimeException ex) {
            if (e != null) {
                if (e.rtrFailedWithEinval()) {
                    ctx.reprobeGid(settings, config.sysfsRoot());
                }
                redispatch(e.breakDown());
            }
            LOG.warn("Connection from {} rejected: {}", req.localNicPath(), ex.getMessage());
            return HandShakeDesc.rejection(ex.getMessage() == null ? ex.toString() : ex.getMessage());
        }
        if (e.state() == RdmaEndpoint.CONNECTING) {
            e.markState(req.readyAck() != null ? RdmaEndpoint.WAIT_ACK : RdmaEndpoint.CONNECTED);
        }
        pump(e);
        // like C++: the reply always advertises the ready-ACK; it is awaited only if the requester advertised it
        return new HandShakeDesc(ctx.nicPath, req.localNicPath(), ctx.gid.toString(), ctx.lid, e.qpNums(),
                Boolean.FALSE, "", "");
    }

    /** The active side (spec §5.4), on a connector thread; on failure the queued slices are retried elsewhere. */
    private void connect(RdmaEndpoint e, PeerSegment peer, int peerDevice) {
        RdmaContext ctx = e.ctx;
        try {
            if (e.peerNicPath.equals(ctx.nicPath)) { // loopback: QPs wired to themselves, no RPC
                e.bringUp(ctx.gid, ctx.lid, e.qpNums(), settings);
            } else {
                HandShakeDesc req = new HandShakeDesc(ctx.nicPath, e.peerNicPath, ctx.gid.toString(), ctx.lid,
                        e.qpNums(), Boolean.FALSE, "", "");
                String to = HandShakeDesc.serverOf(e.peerNicPath);
                HandShakeDesc reply = exchange(to, req);
                if (!reply.replyMsg().isEmpty()) {
                    throw new TransferEngineException("peer rejected the connection: " + reply.replyMsg());
                }
                if (!reply.localNicPath().equals(e.peerNicPath) || !reply.peerNicPath().equals(ctx.nicPath)) {
                    throw new TransferEngineException(String.format(Locale.ROOT,
                            "reply names %s -> %s, expected %s -> %s", reply.localNicPath(), reply.peerNicPath(),
                            e.peerNicPath, ctx.nicPath));
                }
                String gidText = reply.localGid().isEmpty() ? peer.gid[peerDevice] : reply.localGid();
                if (!e.bringUp(Gid.parse(gidText), reply.localLid(), reply.qpNums(), settings)) {
                    throw new TransferEngineException("endpoint " + e + " is connected to other QPs");
                }
                if (reply.readyAck() != null) {
                    HandShakeDesc ack = exchange(to, req.withReadyAck(Boolean.TRUE));
                    if (!ack.replyMsg().isEmpty()) {
                        throw new TransferEngineException("peer rejected the ready-ACK: " + ack.replyMsg());
                    }
                }
            }
            e.markState(RdmaEndpoint.CONNECTED);
            LOG.debug("endpoint {} connected ({} QPs)", e, e.qpCount());
            pump(e);
        } catch (RuntimeException ex) {
            LOG.warn("connecting {} failed: {}", e, ex.getMessage());
            if (e.rtrFailedWithEinval()) {
                ctx.reprobeGid(settings, config.sysfsRoot());
            }
            List<Slice> back = e.breakDown();
            for (Slice s : back) {
                s.unreachable = true;
            }
            redispatch(back);
        }
    }

    private HandShakeDesc exchange(String to, HandShakeDesc req) {
        String reply = context.handshake(to, HandshakeFrame.CONNECTION, req.toJson());
        try {
            return HandShakeDesc.parse(reply);
        } catch (IllegalArgumentException e) {
            throw new HandshakeException(ErrorCodes.MALFORMED_JSON, "bad Connection reply from " + to + ": "
                    + e.getMessage(), e);
        }
    }

    // ------------------------------------------------------------------ descriptor

    /** Devices, priority matrix (every registered location in it) and one keyed entry per memory region. */
    @Override
    public void describe(DescriptorContribution out) {
        RdmaContext[] ctxs = contexts;
        List<SegmentDescriptor.Device> devs = new ArrayList<>(ctxs.length);
        for (RdmaContext c : ctxs) {
            devs.add(new SegmentDescriptor.Device(c.name, c.lid, c.gid.toString()));
        }
        Map<String, List<List<String>>> matrix = new LinkedHashMap<>(priorityMatrix);
        for (LocalRegistration r : memory.current().ordered()) {
            List<Long> rk = new ArrayList<>(r.mrs().length);
            List<Long> lk = new ArrayList<>(r.mrs().length);
            for (MemoryRegion mr : r.mrs()) {
                rk.add(Integer.toUnsignedLong(mr.rkey()));
                lk.add(Integer.toUnsignedLong(mr.lkey()));
            }
            out.rdmaBuffer(r.owner(), new SegmentDescriptor.Buffer(r.location(), r.address(), r.length(), rk, lk));
            if (!matrix.containsKey(r.location())) {
                matrix.put(r.location(), List.of(devices(), List.of()));
            }
        }
        out.rdmaDevices(devs, matrix);
    }

    // ------------------------------------------------------------------ memory

    @Override
    public String detectLocation(long address) {
        return memory.detectLocation(address);
    }

    /** Registers on every device ({@link RdmaMemory#register}). */
    @Override
    public int registerBuffers(List<LocalBuffer> buffers) {
        RdmaContext[] ctxs = contexts;
        if (closed || ctxs.length == 0) {
            fail("registerMemory: the RDMA transport is " + (closed ? "closed" : "not installed"));
            return ErrorCodes.INVALID_ARGUMENT;
        }
        return memory.register(ctxs, settings, priorityMatrix, buffers);
    }

    /** {@link RdmaMemory#access}. */
    @Override
    public DeviceMemoryAccess deviceMemoryAccess(String location) {
        return memory.access(location);
    }

    /** How each device registered the buffer at {@code address} ({@code "host"}, {@code "dma-buf"}, {@code "peer-memory"}), or empty (tests, diagnostics). */
    List<String> registrationPaths(long address) {
        return memory.paths(address);
    }

    @Override
    public void unregisterBuffers(List<LocalBuffer> buffers) {
        memory.unregister(buffers);
    }

    // ------------------------------------------------------------------ transfers

    /** The flattened descriptor of {@code peer}, rebuilt when the core replaced its descriptor. */
    private PeerSegment peerSegment(RemoteSegment peer) {
        SegmentDescriptor d = peer.descriptor();
        PeerSegment s = peers.get(peer.id());
        if (s == null || s.descriptor != d) {
            s = new PeerSegment(peer.id(), d);
            peers.put(peer.id(), s);
        }
        return s;
    }

    @Override
    public void forget(RemoteSegment peer) {
        peers.remove(peer.id());
    }

    @Override
    public boolean reaches(RemoteSegment peer) {
        SegmentDescriptor d = peer.descriptor();
        return SegmentDescriptor.RDMA_LIKE.contains(d.protocol()) && !d.devices().isEmpty();
    }

    /** Both sides have keys: the local buffer is registered here and the peer's entry has one rkey per device. */
    @Override
    public boolean canTransfer(RemoteSegment peer, LocalBuffer local, SegmentDescriptor.Buffer remote) {
        if (closed || contexts.length == 0 || !reaches(peer)) {
            return false;
        }
        List<Long> rk = remote.rkey();
        return rk != null && !rk.isEmpty() && rk.size() == peer.descriptor().devices().size()
                && memory.current().containing(local.address()) != null;
    }

    /**
     * Gives up on {@code batch} and returns only when no NIC touches its memory any more: nothing
     * further is posted, posted work gets 2 s to complete, then the endpoints holding it are
     * broken (QPs to ERR flush it) and their completions awaited.
     */
    @Override
    public void evict(BatchTasks batch, long deadlineNanos) {
        List<RdmaBatch> mine = new ArrayList<>();
        for (RdmaBatch b : active) {
            if (b.group.batch() == batch) {
                mine.add(b);
            }
        }
        if (mine.isEmpty()) {
            return;
        }
        long soft = Math.min(deadlineNanos, System.nanoTime() + TimeUnit.SECONDS.toNanos(2));
        boolean quietNow = true;
        for (RdmaBatch b : mine) {
            quietNow &= b.awaitQuiet(soft);
        }
        if (quietNow) {
            return;
        }
        for (RdmaContext c : contexts) {
            for (RdmaEndpoint e : c.endpoints()) {
                if (e.outstandingTotal() > 0) {
                    redispatch(e.breakDown());
                }
            }
        }
        for (RdmaBatch b : mine) {
            if (!b.awaitQuiet(System.nanoTime() + TimeUnit.SECONDS.toNanos(30))) {
                LOG.error("work requests of an abandoned batch still outstanding after 30 s; its buffers may still"
                        + " be accessed by the NIC");
            }
        }
    }

    @Override
    public void submit(RemoteSegment target, SliceGroup group) {
        RdmaBatch[] self = new RdmaBatch[1];
        RdmaBatch b = new RdmaBatch(group, () -> active.remove(self[0]));
        self[0] = b;
        active.add(b);
        PeerSegment peer = peerSegment(target);
        int opRead = SendWorkRequests.OPCODE_RDMA_READ;
        int opWrite = SendWorkRequests.OPCODE_RDMA_WRITE;
        List<RdmaEndpoint> touched = new ArrayList<>(4);
        int sinceFlush = 0;
        int flushEvery = settings.maxWr() * settings.numQpPerEp();
        for (int i = 0, n = group.size(); i < n; i++) {
            long len = group.length(i);
            LocalRegistrations mine = memory.current();
            long lo = group.local(i);
            long ro = group.remote(i);
            LocalRegistration whole = mine.containing(lo);
            int wholeBuf = peer.bufferAt(ro);
            // the common case: the slice lies in one registration and one peer buffer (one lookup each)
            boolean single = whole != null && whole.bytesToEnd(lo) >= len && wholeBuf >= 0
                    && peer.bytesToEnd(wholeBuf, ro) >= len;
            if (!single && (mine.coveredFrom(lo, len) != len || peer.coveredFrom(ro, len) != len)) {
                LOG.warn("transfer of {} bytes from local 0x{} to 0x{} of {}: not inside memory registered with the"
                        + " RDMA transport on both sides", len, Long.toHexString(lo), Long.toHexString(ro),
                        peer.descriptor.name());
                b.expectSlices(i, 0);
                b.endNow(i, false, "not inside RDMA-registered memory");
                continue;
            }
            // work requests are capped at the end of the registration / peer buffer they start in (Mooncake's
            // SliceLengthCalculator), so a slice may span adjacent memory regions on either side
            int slicesInTask = 0;
            if (single) {
                slicesInTask = sliceCount(len);
            } else {
                for (long off = 0; off < len; slicesInTask++) {
                    off += sliceLength(mine, peer, lo + off, ro + off, len - off);
                }
            }
            b.expectSlices(i, slicesInTask);
            int opcode = group.isWrite(i) ? opWrite : opRead;
            long off = 0;
            for (int j = 0; j < slicesInTask; j++) {
                long sliceLen = single ? (j == slicesInTask - 1 ? len - off : settings.sliceSize())
                        : sliceLength(mine, peer, lo + off, ro + off, len - off);
                Slice s = slices.acquire();
                s.batch = b;
                s.task = i;
                s.opcode = opcode;
                s.local = lo + off;
                s.remote = ro + off;
                s.length = (int) sliceLen;
                s.attempt = 0;
                s.seed = seeds.getAndIncrement();
                s.peer = peer;
                s.peerBuffer = single ? wholeBuf : peer.bufferAt(ro + off);
                off += sliceLen;
                RdmaEndpoint e = dispatch(s, single ? whole : mine.containing(s.local));
                if (e != null && !touched.contains(e)) {
                    touched.add(e);
                }
                if (++sinceFlush >= flushEvery) {
                    sinceFlush = 0;
                    pumpAndClear(touched);
                }
            }
        }
        pumpAndClear(touched);
    }

    private void pumpAndClear(List<RdmaEndpoint> touched) {
        for (RdmaEndpoint e : touched) {
            pump(e);
        }
        touched.clear();
    }

    /**
     * The slice starting at {@code local}/{@code remote} with {@code remaining} bytes of its task
     * left: {@code MC_SLICE_SIZE}, or all of it when at most slice + fragment limit remain, capped
     * at the end of the local registration and of the peer buffer it starts in. Both sides must
     * be covered (checked by the caller).
     */
    private long sliceLength(LocalRegistrations local, PeerSegment peer, long localAddr, long remoteAddr,
            long remaining) {
        long slice = settings.sliceSize();
        long len = remaining <= slice + settings.fragmentLimit() ? remaining : slice;
        len = Math.min(len, local.containing(localAddr).bytesToEnd(localAddr));
        return Math.min(len, peer.bytesToEnd(peer.bufferAt(remoteAddr), remoteAddr));
    }

    /** Slices of a task within one buffer on each side: {@code MC_SLICE_SIZE} each, the last one up to slice + fragment limit. */
    int sliceCount(long len) {
        return sliceCount(settings, len);
    }

    /** {@link #sliceCount(long)} under {@code settings}. */
    static int sliceCount(RdmaSettings settings, long len) {
        long slice = settings.sliceSize();
        long limit = slice + settings.fragmentLimit();
        if (len <= limit) {
            return 1;
        }
        long full = (len - limit + slice - 1) / slice; // full slices before a tail <= limit
        return (int) (full + 1);
    }

    /**
     * Chooses the path of {@code s}'s current attempt and queues it on that endpoint (created and
     * connected in the background when new). Returns the endpoint, or null when the slice ended.
     */
    private RdmaEndpoint dispatch(Slice s, LocalRegistration reg) {
        while (true) {
            if (closed || s.batch.aborted()) {
                abandon(s);
                return null;
            }
            RdmaContext[] ctxs = contexts;
            if (reg == null) {
                reg = memory.current().containing(s.local);
                if (reg == null || reg.bytesToEnd(s.local) < s.length) {
                    LOG.warn("local memory at 0x{} was unregistered during a transfer", Long.toHexString(s.local));
                    finishSlice(s, false);
                    return null;
                }
            }
            int ci = reg.activeContext(s.seed, s.attempt, ctxs);
            if (ci < 0) {
                LOG.warn("no RDMA device is active (port or device failure events); slice of {} bytes fails",
                        s.length);
                finishSlice(s, false);
                return null;
            }
            RdmaContext ctx = ctxs[ci];
            PeerSegment peer = s.peer;
            int dev = peer.device(s.peerBuffer, s.seed, s.attempt);
            s.lkey = reg.lkeys()[ctx.index];
            s.rkey = peer.rkey[s.peerBuffer][dev];
            String path = peer.nicPath[dev];
            RdmaEndpoint e = ctx.endpoint(path); // the common case: no allocation
            if (e == null) {
                try {
                    e = createEndpoint(ctx, path, peer, dev);
                } catch (RuntimeException ex) {
                    LOG.warn("cannot create an endpoint {} -> {}: {}", ctx.name, path, ex.getMessage());
                    if (!nextAttempt(s)) {
                        return null;
                    }
                    continue;
                }
            }
            if (e.enqueue(s)) {
                return e;
            }
            // the endpoint broke in between: pick it again (a fresh one is created)
        }
    }

    /** A new endpoint towards {@code path} (or the one another thread just created), its handshake started. */
    private RdmaEndpoint createEndpoint(RdmaContext ctx, String path, PeerSegment peer, int dev) {
        if (ctx.endpointCount() >= settings.maxEpPerCtx()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "%d endpoints on %s reach MC_MAX_EP_PER_CTX", ctx.endpointCount(), ctx.name));
        }
        boolean[] created = new boolean[1];
        RdmaSettings s = settings;
        RdmaEndpoint e = ctx.endpointOrCreate(path, p -> new RdmaEndpoint(ctx, p, s), created);
        if (created[0]) {
            startConnect(e, peer, dev);
        }
        return e;
    }

    private void startConnect(RdmaEndpoint e, PeerSegment peer, int dev) {
        // a platform thread: QP creation and the RTR/RTS transitions are blocking downcalls (RTR on RoCE may wait
        // for neighbour resolution), which would pin a virtual thread's carrier for their whole duration
        Thread t = Thread.ofPlatform().daemon(true).name("mooncake-rdma-connect-" + CONNECTORS.getAndIncrement())
                .unstarted(() -> {
            try {
                connect(e, peer, dev);
            } finally {
                connectors.remove(Thread.currentThread());
            }
        });
        connectors.add(t);
        t.start();
    }

    private void pump(RdmaEndpoint e) {
        if (e.pump(this)) {
            redispatch(e.breakDown());
        }
    }

    /** Poller: posts what completions made room for on an endpoint that was waiting for it. */
    void pumpFromPoller(RdmaEndpoint e) {
        if (e.state() == RdmaEndpoint.CONNECTED) {
            pump(e);
        }
    }

    /** Slices taken back from a broken endpoint: each counts a failed attempt. */
    private void redispatch(List<Slice> back) {
        for (Slice s : back) {
            if (nextAttempt(s)) {
                RdmaEndpoint e = dispatch(s, null);
                if (e != null) {
                    pump(e);
                }
            }
        }
    }

    /** Counts a failed attempt; false (and the slice ended FAILED) when the retry count is used up. */
    private boolean nextAttempt(Slice s) {
        if (closed || s.batch.aborted()) {
            abandon(s);
            return false;
        }
        s.attempt++;
        if (s.attempt >= settings.retryCnt()) {
            LOG.warn("slice of {} bytes at 0x{} failed {} time(s) (MC_RETRY_CNT = {}); its task fails", s.length,
                    Long.toHexString(s.remote), s.attempt, settings.retryCnt());
            finishSlice(s, false);
            return false;
        }
        retriedSlices.incrementAndGet();
        return true;
    }

    /** A slice that will not be posted (aborted batch, closing engine). */
    void abandon(Slice s) {
        finishSlice(s, false);
    }

    private void finishSlice(Slice s, boolean ok) {
        RdmaBatch b = s.batch;
        int task = s.task;
        boolean unreachable = s.unreachable;
        slices.release(s);
        b.sliceDone(task, ok, unreachable);
    }

    /** Poller: one completion. */
    void onCompletion(RdmaContext ctx, long wrId, int status, int vendorErr) {
        Slice s = slices.get(wrId);
        if (s == null || s.endpoint == null) {
            LOG.error("completion on {} for unknown work request {} (status {})", ctx.name, wrId,
                    WorkCompletions.statusName(status));
            return;
        }
        RdmaEndpoint e = s.endpoint;
        RdmaBatch b = s.batch;
        e.completed(s.qp);
        try {
            if (status == WorkCompletions.SUCCESS) {
                finishSlice(s, true);
                return;
            }
            failedCompletions.incrementAndGet();
            if (e.state() != RdmaEndpoint.BROKEN) {
                LOG.warn("work request to {} completed with {} (vendor error 0x{}); rebuilding the endpoint and"
                        + " retrying on another path", e, WorkCompletions.statusName(status),
                        Integer.toHexString(vendorErr));
                redispatch(e.breakDown());
            } else {
                e.destroyIfIdle();
            }
            redispatch(List.of(s));
        } finally {
            b.inFlight.decrementAndGet(); // last: an aborter waiting for 0 finds the slice already settled
        }
    }

    /** Poller: the CQ is unusable; every endpoint of the context is rebuilt. */
    void contextFailed(RdmaContext ctx) {
        for (RdmaEndpoint e : ctx.endpoints()) {
            redispatch(e.breakDown());
        }
    }
}
