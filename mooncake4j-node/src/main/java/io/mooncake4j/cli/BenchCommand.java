package io.mooncake4j.cli;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.DeviceCopier;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.internal.sys.SharedMemory;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * {@code bin/mooncake4j bench}: Mooncake's {@code transfer_engine_bench} for mooncake4j engines,
 * with the same flags, defaults (where they apply), memory layout and summary line, plus latency
 * percentiles per batch, a progress line per second and {@code --verify}.
 *
 * <p><b>Target</b> allocates and registers one buffer, prints its segment name
 * ({@code host:rpcPort}) and waits until killed (SIGINT/SIGTERM), {@link #requestStop()} or, if given,
 * {@code --duration}. <b>Initiator</b> opens {@code --segment_id}, takes the target's first buffer
 * as remote base and runs {@code --threads} workers for {@code --duration} seconds; worker
 * {@code t} moves blocks {@code i·threads + t} (i = 0..batch_size−1) at the same offsets locally
 * and remotely, as Mooncake's bench does. With {@code --verify} each batch writes a fresh pattern,
 * reads it back into the second half of the local buffer and compares every byte.
 *
 * <p><b>{@code --use_vram}</b> (Mooncake's flag, here off by default) puts the buffer in GPU memory
 * {@code cuda:<gpu_id>} (allocated and reached through a {@link DeviceMemory}: CUDA, or an injected
 * emulation in tests) and registers it with that location; the engine must say it can move GPU
 * memory ({@link TransferEngine#deviceMemoryAccess}), so the mock engine, which copies with the CPU, is
 * refused. {@code --init_mem} (default true, as in Mooncake) fills it with {@code 0xCC}. With
 * {@code --verify} each worker writes its pattern into page-locked host scratch, copies it to the GPU,
 * and copies the read-back blocks from the GPU into scratch to compare them. Where CUDA is unusable the
 * bench prints the cause and the fix and exits 1 before creating an engine.
 *
 * <p>Workers reuse their request arrays and latency histograms: nothing is allocated per batch or
 * per descriptor by the bench itself. One instance runs one command at a time.
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code mooncake-transfer-engine/example/transfer_engine_bench.cpp}
 */
final class BenchCommand implements CliCommand {

    /** Mooncake's {@code --report_unit} table: bytes per unit. */
    private static final Map<String, Double> UNITS = new LinkedHashMap<>();

    static {
        UNITS.put("GB", 1e9);
        UNITS.put("GiB", (double) (1L << 30));
        UNITS.put("Gb", 1e9 / 8);
        UNITS.put("MB", 1e6);
        UNITS.put("MiB", (double) (1L << 20));
        UNITS.put("Mb", 1e6 / 8);
        UNITS.put("KB", 1e3);
        UNITS.put("KiB", 1024.0);
        UNITS.put("Kb", 1e3 / 8);
    }

    private final CountDownLatch stopRequested = new CountDownLatch(1);
    private final DeviceMemory deviceMemory;
    private final Function<String, TransferEngine> engines;

    BenchCommand() {
        this(CudaDeviceMemory.INSTANCE, BenchCommand::createEngine);
    }

    /**
     * {@link TransferEngines#create}: {@code shm-direct} is the library's kind for the shm transport
     * on its own (synchronous calls only); {@code shm} the engine core with every transport.
     */
    static TransferEngine createEngine(String kind) {
        return TransferEngines.create(kind);
    }

    /**
     * A bench whose {@code --use_vram} memory comes from {@code deviceMemory} and whose engines
     * {@code engines} creates from the {@code --engine} kind (tests inject an emulated GPU and
     * engines that reach it).
     */
    BenchCommand(DeviceMemory deviceMemory, Function<String, TransferEngine> engines) {
        this.deviceMemory = Objects.requireNonNull(deviceMemory, "deviceMemory");
        this.engines = Objects.requireNonNull(engines, "engines");
    }

    /** The parsed flags. */
    record Options(String mode, String operation, String protocol, String metadataServer, String localServerName,
            String segmentId, long bufferSize, int batchSize, long blockSize, double duration, boolean durationGiven,
            int threads, String reportUnit, int reportPrecision, String deviceName, String engineKind, boolean verify,
            String api, boolean useVram, int gpuId, boolean initMem, boolean memcpyBaseline) {

        /** {@code cuda:<gpu_id>} with {@code --use_vram}, else the host location. */
        String location() {
            return useVram ? MemoryLocation.cuda(gpuId) : MemoryLocation.cpu(0);
        }

        boolean write() {
            return operation.equals("write");
        }

        /** Local bytes the layout needs: {@code block·batch·threads}, twice that with {@code --verify}. */
        long required() {
            long one = Math.multiplyExact(Math.multiplyExact(blockSize, (long) batchSize), (long) threads);
            return verify ? Math.multiplyExact(one, 2L) : one;
        }

        static Options parse(Flags f) {
            String mode = f.string("mode", "initiator");
            if (!mode.equals("initiator") && !mode.equals("target")) {
                throw new Flags.UsageException("--mode must be initiator or target, got '" + mode + "'");
            }
            String op = f.string("operation", "read");
            if (!op.equals("read") && !op.equals("write")) {
                throw new Flags.UsageException("Unsupported operation: must be 'read' or 'write', got '" + op + "'");
            }
            String protocol = f.string("protocol", "tcp");
            String metadata = f.string("metadata_server", TransferEngine.P2P_HANDSHAKE);
            String local = f.string("local_server_name", defaultHostname());
            String segment = f.string("segment_id", null);
            long bufferSize = f.longValue("buffer_size", 1L << 30);
            int batch = f.intValue("batch_size", 128);
            long block = f.longValue("block_size", 65536);
            boolean durationGiven = f.has("duration");
            double duration = f.doubleValue("duration", 10);
            int threads = f.intValue("threads", 12);
            String unit = f.string("report_unit", "GB");
            int precision = f.intValue("report_precision", 2);
            String device = f.string("device_name", "mlx5_2");
            String engine = f.string("engine", protocol);
            boolean verify = f.bool("verify", false);
            String api = f.string("api", "sync");
            f.bool("auto_discovery", false); // accepted for compatibility; the protocol picks the transport
            boolean useVram = f.bool("use_vram", false);
            int gpuId = f.intValue("gpu_id", 0);
            boolean initMem = f.bool("init_mem", true);
            // on by default where the transfer is itself a memcpy (shm, or auto on one machine)
            boolean memcpyBaseline = f.bool("memcpy_baseline", protocol.equals("shm") || protocol.equals("auto"));
            if (useVram && gpuId < 0) {
                throw new Flags.UsageException("--gpu_id must be a GPU index >= 0; Mooncake's --gpu_id=-1 (one buffer "
                        + "per GPU) is not supported: run one bench per GPU");
            }
            if (useVram && engine.equalsIgnoreCase("mock")) {
                throw new Flags.UsageException("--use_vram cannot run on --engine=mock: the in-JVM engine copies with "
                        + "the CPU and would touch GPU memory directly; use --engine=tcp (GPU memory is staged "
                        + "through pinned host buffers)");
            }
            positive("batch_size", batch);
            positive("block_size", block);
            positive("threads", threads);
            positive("buffer_size", bufferSize);
            if (precision < 0 || precision > 12) {
                throw new Flags.UsageException("--report_precision must be within 0..12, got " + precision);
            }
            if (!(duration > 0) || Double.isInfinite(duration)) {
                throw new Flags.UsageException("--duration must be a positive number of seconds, got " + duration);
            }
            if (!api.equals("sync") && !api.equals("async")) {
                throw new Flags.UsageException("--api must be sync or async, got '" + api + "'");
            }
            if (mode.equals("initiator") && (segment == null || segment.isEmpty())) {
                throw new Flags.UsageException("initiator mode needs --segment_id=<host:rpcPort> of the target "
                        + "(the name a target prints on its 'listening on' line)");
            }
            return new Options(mode, op, protocol, metadata, local, segment, bufferSize, batch, block, duration,
                    durationGiven, threads, unit, precision, device, engine, verify, api, useVram, gpuId, initMem,
                    memcpyBaseline && !useVram);
        }

        private static void positive(String flag, long value) {
            if (value <= 0) {
                throw new Flags.UsageException("--" + flag + " must be positive, got " + value);
            }
        }

        private static String defaultHostname() {
            try {
                return InetAddress.getLocalHost().getHostName();
            } catch (UnknownHostException e) {
                return "localhost";
            }
        }
    }

    @Override
    public String name() {
        return "bench";
    }

    @Override
    public String summary() {
        return "transfer benchmark: Mooncake transfer_engine_bench flags (target or initiator), --verify";
    }

    @Override
    public String usage() {
        return """
                usage: bin/mooncake4j bench --mode=target    [flags]
                       bin/mooncake4j bench --mode=initiator --segment_id=<host:rpcPort> [flags]

                Mirrors Mooncake's transfer_engine_bench (same flags, same 'Test completed:' line);
                interoperates with it over --protocol=tcp --metadata_server=P2PHANDSHAKE.

                  --mode=initiator|target     (initiator)
                  --operation=read|write      (read)
                  --protocol=tcp|rdma|shm|auto (tcp; Mooncake's default rdma needs an RDMA engine; shm: same
                                              machine, host memory mapped from the peer, one memcpy per request)
                  --metadata_server=P2PHANDSHAKE   (the only mode supported)
                  --local_server_name=<host>  (this host's name) host part of our segment name
                  --segment_id=<host:port>    initiator: the target's segment name (required)
                  --buffer_size=<bytes>       (1G) raised to block*batch*threads (x2 with --verify)
                  --batch_size=<n>            (128) requests per batch
                  --block_size=<bytes>        (65536) bytes per request
                  --duration=<seconds>        (10) initiator run time; target: exit after it if given
                  --threads=<n>               (12) submitting threads
                  --report_unit=GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb   (GB)
                  --report_precision=<n>      (2)
                  --device_name=<list>        (mlx5_2) RDMA device filter; unused by tcp
                  --verify                    write a fresh pattern each batch, read it back, check every byte
                  --api=sync|async            (sync) batchTransferSync* per batch, or Mooncake's
                                              allocateBatchId/submitTransfer/getTransferStatus loop
                  --engine=<kind>             (the --protocol value) engine kind for TransferEngines.create;
                                              shm-direct: the shm transport alone (sync API, same machine)
                  --use_vram                  (false) the buffer is GPU memory cuda:<gpu_id> (needs CUDA and an
                                              engine that moves GPU memory: tcp stages it through pinned buffers)
                  --gpu_id=<n>                (0) the GPU of --use_vram (Mooncake's -1, all GPUs, is not supported)
                  --init_mem                  (true) with --use_vram: fill the GPU buffer with 0xCC first
                  --auto_discovery            accepted for compatibility and ignored (--protocol picks the transport)
                  --memcpy_baseline           (true for --protocol=shm|auto) after the run, time memcpy of the
                                              same layout (threads, batch, block) between two local buffers
                                              for the same duration and print it with the transfer/memcpy ratio

                Output: progress once a second on stderr; on stdout the summary
                  Test completed: duration <s>, batch count <n>, throughput <rate> <unit>/s
                and the per-batch latency percentiles (p50/p90/p99/max).""";
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("mode", "operation", "protocol", "metadata_server", "local_server_name", "segment_id",
                "buffer_size", "batch_size", "block_size", "duration", "threads", "report_unit", "report_precision",
                "device_name", "engine", "verify", "api", "auto_discovery", "use_vram", "gpu_id", "init_mem",
                "memcpy_baseline");
    }

    /** Makes a running target (or initiator) stop early, as SIGINT would. */
    void requestStop() {
        stopRequested.countDown();
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) throws Exception {
        Options o = Options.parse(flags);
        flags.rejectUnknown();
        flags.rejectPositional();
        Double unitBytes = UNITS.get(o.reportUnit());
        String unit = o.reportUnit();
        if (unitBytes == null) {
            err.printf(Locale.ROOT, "Invalid flag: report_unit only support GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb, not support %s"
                    + " . Now use GB(default) as report_unit%n", unit);
            unit = "GB";
            unitBytes = UNITS.get(unit);
        }
        long bufferSize = o.bufferSize();
        if (bufferSize < o.required()) {
            err.printf(Locale.ROOT, "Invalid flag: buffer size is smaller than require_size, adjust to %d%n",
                    o.required());
            bufferSize = o.required();
        }
        if (o.useVram()) {
            try {
                deviceMemory.checkLocation(o.location());
            } catch (RuntimeException e) {
                err.println("bench: --use_vram: the buffer cannot go to " + o.location() + ": " + e.getMessage());
                err.println("bench: nothing was started; run without --use_vram to benchmark host memory");
                return 1;
            }
        }
        DeviceMemory.Allocation vram = null;
        try {
            try (TransferEngine engine = engines.apply(o.engineKind());
                    HostMemoryAllocator allocator = new HostMemoryAllocator()) {
                int rc = engine.initialize(o.localServerName(), o.metadataServer(), o.protocol(), o.deviceName());
                if (rc != 0) {
                    err.printf(Locale.ROOT, "bench: initialize(%s, %s, %s) failed with %d%n", o.localServerName(),
                            o.metadataServer(), o.protocol(), rc);
                    String why = TransferEngines.lastError(engine);
                    if (why != null && !why.isEmpty()) {
                        err.println("bench: " + why);
                    }
                    return 1;
                }
                MemoryStorage buffer;
                Vram staging = null;
                if (o.useVram()) {
                    DeviceMemoryAccess access = engine.deviceMemoryAccess(o.location());
                    if (!access.allowed()) {
                        err.printf(Locale.ROOT, "bench: --use_vram: engine %s (protocol %s) cannot move GPU memory at "
                                + "%s: %s%n", o.engineKind(), engine.protocol(), o.location(),
                                access.description() == null || access.description().isEmpty()
                                        ? "it does not say it can (" + access.kind() + "); use --engine=tcp"
                                        : access.description());
                        return 1;
                    }
                    vram = deviceMemory.allocate(o.gpuId(), bufferSize);
                    staging = new Vram(deviceMemory, o.gpuId());
                    if (o.initMem()) {
                        staging.fill(vram, (byte) 0xCC);
                    }
                    buffer = vram;
                    out.printf(Locale.ROOT, "bench: buffer in GPU memory %s (%s): %s%n", o.location(),
                            deviceMemory.name(), access.description());
                } else {
                    // shm and auto can map a same-machine peer's buffer only if it is shareable (memfd)
                    boolean share = o.protocol().equals("shm") || o.protocol().equals("auto");
                    HostMemoryStorage host = share && SharedMemory.available() ? allocator.allocateShareable(bufferSize)
                            : allocator.allocate(bufferSize);
                    host.segment().fill((byte) 0); // first touch before the run, as the memcpy baseline's
                    buffer = host;
                }
                rc = engine.registerMemory(buffer.address(), buffer.byteSize(), buffer.location());
                if (rc != 0) {
                    err.printf(Locale.ROOT, "bench: registering %s at 0x%x (%s) failed with %d%n",
                            Bytes.human(bufferSize), buffer.address(), buffer.location(), rc);
                    return 1;
                }
                try {
                    return o.mode().equals("target")
                            ? runTarget(o, engine, buffer, out, err)
                            : runInitiator(o, engine, buffer, staging, unit, unitBytes, out, err);
                } finally {
                    engine.unregisterMemory(buffer.address());
                }
            }
        } finally {
            if (vram != null) {
                vram.close(); // after the engine closed: nothing copies from it any more
            }
        }
    }

    /** How workers reach a GPU buffer: bulk copies through page-locked host scratch. */
    private record Vram(DeviceMemory memory, int device) {

        /** Sets every byte of {@code buffer} to {@code value} through host-to-device copies of a 4 MiB chunk. */
        void fill(MemoryStorage buffer, byte value) {
            long chunk = Math.min(buffer.byteSize(), 4L << 20);
            try (HostMemoryStorage scratch = memory.allocatePinned(chunk);
                    DeviceCopier copier = new DeviceCopier(memory, device, 1)) {
                scratch.segment().fill(value);
                for (long off = 0; off < buffer.byteSize(); off += chunk) {
                    copier.toDevice(buffer.address() + off, scratch.address(), Math.min(chunk, buffer.byteSize() - off));
                }
                copier.synchronize();
            }
        }
    }

    // ------------------------------------------------------------------ target

    private int runTarget(Options o, TransferEngine engine, MemoryStorage buffer, PrintStream out,
            PrintStream err) throws InterruptedException {
        CountDownLatch cleanedUp = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            stopRequested.countDown();
            try {
                cleanedUp.await(5, TimeUnit.SECONDS); // let the main thread unregister and close first
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "mooncake-bench-shutdown-0");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            out.printf(Locale.ROOT, "Transfer Engine RPC using P2P handshake, listening on %s%n",
                    engine.getLocalSegmentName());
            out.printf(Locale.ROOT, "bench target: protocol %s, buffer %s at 0x%x (%s); pass --segment_id=%s to the "
                    + "initiator; %s%n", engine.protocol(), Bytes.human(buffer.byteSize()), buffer.address(),
                    buffer.location(),
                    engine.getLocalSegmentName(),
                    o.durationGiven() ? String.format(Locale.ROOT, "running for %.1f s", o.duration())
                            : "waiting until killed (Ctrl-C)");
            out.flush();
            if (o.durationGiven()) {
                stopRequested.await(Math.round(o.duration() * 1e9), TimeUnit.NANOSECONDS);
            } else {
                stopRequested.await();
            }
            out.println("bench target: stopping");
            return 0;
        } finally {
            cleanedUp.countDown();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shutdownInProgress) {
                // the hook is running; it returns once cleanedUp is counted down
            }
        }
    }

    // ------------------------------------------------------------------ initiator

    private int runInitiator(Options o, TransferEngine engine, MemoryStorage buffer, Vram vram, String unit,
            double unitBytes, PrintStream out, PrintStream err) throws InterruptedException {
        long segment = engine.openSegment(o.segmentId());
        if (segment < 0) {
            err.printf(Locale.ROOT, "bench: cannot open segment '%s' (is the target running, and is the name the "
                    + "one it printed?)%n", o.segmentId());
            return 1;
        }
        long remoteBase = engine.getFirstBufferAddress(o.segmentId());
        if (remoteBase == -1) {
            err.printf(Locale.ROOT, "bench: segment '%s' advertises no buffer (or engine %s cannot tell)%n",
                    o.segmentId(), o.engineKind());
            return 1;
        }
        // half the memcpy reference before the run and half after, so that a load change on a shared
        // machine weighs on both figures alike
        MemcpyBaseline before = o.memcpyBaseline()
                ? MemcpyBaseline.measure(o.threads(), o.batchSize(), o.blockSize(), o.duration() / 2) : null;
        AtomicReference<String> failure = new AtomicReference<>();
        CountDownLatch failed = new CountDownLatch(1);
        List<Worker> workers = new ArrayList<>();
        for (int t = 0; t < o.threads(); t++) {
            workers.add(new Worker(o, engine, segment, buffer, vram, remoteBase, t, failure, failed));
        }
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (Worker w : workers) {
            Thread th = new Thread(w, "mooncake-bench-initiator-" + w.thread);
            th.setDaemon(true);
            threads.add(th);
            th.start();
        }
        long deadline = start + Math.round(o.duration() * 1e9);
        long bytesPerBatch = o.blockSize() * o.batchSize() * (o.verify() ? 2 : 1);
        long lastBatches = 0;
        long lastTick = start;
        while (true) {
            long now = System.nanoTime();
            long wait = Math.min(deadline - now, lastTick + 1_000_000_000L - now);
            if (wait > 0 && (failed.await(wait, TimeUnit.NANOSECONDS) || stopRequested.getCount() == 0)) {
                break;
            }
            now = System.nanoTime();
            if (now - lastTick >= 1_000_000_000L) {
                long batches = 0;
                for (int i = 0; i < workers.size(); i++) { // indexed: no iterator garbage in the profile
                    batches += workers.get(i).batches.get();
                }
                double rate = (batches - lastBatches) * (double) bytesPerBatch / ((now - lastTick) / 1e9) / unitBytes;
                err.printf(Locale.ROOT, "[%6.1f s] batches %d, %." + o.reportPrecision() + "f %s/s%n",
                        (now - start) / 1e9, batches, rate, unit);
                lastBatches = batches;
                lastTick = now;
            }
            if (now >= deadline) {
                break;
            }
        }
        for (Worker w : workers) {
            w.running = false;
        }
        for (Thread th : threads) {
            th.join();
        }
        double duration = (System.nanoTime() - start) / 1e9;
        long batches = 0;
        LatencyHistogram all = new LatencyHistogram();
        for (Worker w : workers) {
            batches += w.batches.get();
            all.add(w.latencies);
        }
        if (failure.get() != null) {
            err.println("FAILED: " + failure.get());
            return 1;
        }
        double rate = batches * (double) bytesPerBatch / duration / unitBytes;
        out.printf(Locale.ROOT, "Test completed: duration %.2f, batch count %d, throughput %." + o.reportPrecision()
                + "f %s/s%n", duration, batches, rate, unit);
        if (o.memcpyBaseline()) {
            MemcpyBaseline m = before.plus(
                    MemcpyBaseline.measure(o.threads(), o.batchSize(), o.blockSize(), o.duration() / 2));
            double base = m.bytesPerSecond() / unitBytes;
            out.printf(Locale.ROOT, "Memcpy baseline: %d batches in %.2f s, throughput %." + o.reportPrecision()
                    + "f %s/s (same threads, batch and block, two local buffers, half before and half after "
                    + "the run); transfer/memcpy %.2fx%n",
                    m.batches(), m.seconds(), base, unit, rate / base);
        }
        out.printf(Locale.ROOT, "Batch latency (%d batches of %d x %s, %s %s, %s): p50 %s, p90 %s, p99 %s, max %s%n",
                all.count(), o.batchSize(), Bytes.human(o.blockSize()), o.verify() ? "write+read-back" : o.operation(),
                o.api(), buffer.location(), micros(all.percentile(0.50)), micros(all.percentile(0.90)), micros(all.percentile(0.99)),
                micros(all.max()));
        out.printf(Locale.ROOT, "Descriptors: %.0f /s%n", batches * (double) o.batchSize() * (o.verify() ? 2 : 1)
                / duration);
        if (!engine.bytesByTransport().isEmpty()) {
            StringBuilder by = new StringBuilder();
            engine.bytesByTransport().forEach((k, v) -> by.append(by.isEmpty() ? "" : ", ").append(k).append(' ')
                    .append(Bytes.human(v)));
            out.printf(Locale.ROOT, "Bytes by transport: %s (handed to each by this engine, fallbacks counted twice)%n",
                    by);
        }
        if (o.verify()) {
            out.printf(Locale.ROOT, "Verify: %d batches written and read back, %s compared, every byte matched "
                    + "(throughput counts both directions%s)%n", batches, Bytes.human(batches * o.blockSize()
                    * o.batchSize()), vram != null ? "; patterns staged to and from " + buffer.location()
                    + " with host copies inside the timed batches" : "");
        }
        return 0;
    }

    private static String micros(long nanos) {
        return nanos >= 10_000_000L ? String.format(Locale.ROOT, "%.1f ms", nanos / 1e6)
                : String.format(Locale.ROOT, "%.0f us", nanos / 1e3);
    }

    /** One submitting thread: its requests are built once and reused for every batch. */
    private static final class Worker implements Runnable {
        final int thread;
        final AtomicLong batches = new AtomicLong();
        final LatencyHistogram latencies = new LatencyHistogram();
        volatile boolean running = true;

        private final Options o;
        private final TransferEngine engine;
        private final long segment;
        private final String segmentName;
        private final MemorySegment local;  // the host buffer, null with --use_vram
        private final Vram vram;            // null for a host buffer
        private final long localBase;
        private HostMemoryStorage scratch;  // --use_vram --verify: pattern | read-back, owned by the worker thread
        private DeviceCopier copier;        // --use_vram --verify, owned by the worker thread
        private final long[] src;       // local addresses (region A)
        private final long[] readBack;  // local addresses (region B, --verify)
        private final long[] dst;       // remote addresses
        private final long[] lengths;
        private final long[] offsets;   // offset of block i in both regions
        private final List<TransferRequest> primary;
        private final List<TransferRequest> verifyWrite;
        private final List<TransferRequest> verifyRead;
        private final AtomicReference<String> failure;
        private final CountDownLatch failed;

        Worker(Options o, TransferEngine engine, long segment, MemoryStorage buffer, Vram vram, long remoteBase,
                int thread, AtomicReference<String> failure, CountDownLatch failed) {
            this.o = o;
            this.engine = engine;
            this.segment = segment;
            this.segmentName = o.segmentId();
            this.thread = thread;
            this.vram = vram;
            this.local = vram == null ? buffer.hostSegment().orElseThrow() : null;
            this.localBase = buffer.address();
            this.failure = failure;
            this.failed = failed;
            int n = o.batchSize();
            long half = o.required() / 2;
            src = new long[n];
            readBack = new long[n];
            dst = new long[n];
            lengths = new long[n];
            offsets = new long[n];
            List<TransferRequest> p = new ArrayList<>(n);
            List<TransferRequest> vw = new ArrayList<>(n);
            List<TransferRequest> vr = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                long off = o.blockSize() * ((long) i * o.threads() + thread);
                offsets[i] = off;
                src[i] = localBase + off;
                readBack[i] = localBase + half + off;
                dst[i] = remoteBase + off;
                lengths[i] = o.blockSize();
                p.add(new TransferRequest(o.write() ? TransferRequest.Opcode.WRITE : TransferRequest.Opcode.READ,
                        src[i], segment, dst[i], lengths[i]));
                vw.add(TransferRequest.write(src[i], segment, dst[i], lengths[i]));
                vr.add(TransferRequest.read(readBack[i], segment, dst[i], lengths[i]));
            }
            primary = List.copyOf(p);
            verifyWrite = List.copyOf(vw);
            verifyRead = List.copyOf(vr);
        }

        @Override
        public void run() {
            try {
                if (vram != null && o.verify()) {
                    scratch = vram.memory().allocatePinned(2L * o.batchSize() * o.blockSize());
                    copier = new DeviceCopier(vram.memory(), vram.device(), 1);
                }
                long batch = 0;
                while (running) {
                    long t0 = System.nanoTime();
                    String problem = o.verify() ? verifiedBatch(batch) : plainBatch();
                    long t1 = System.nanoTime();
                    if (problem != null) {
                        fail(problem);
                        return;
                    }
                    latencies.record(t1 - t0);
                    batches.lazySet(++batch);
                }
            } catch (RuntimeException | Error e) {
                fail("worker " + thread + " crashed: " + e);
                throw e;
            } finally {
                if (copier != null) {
                    copier.close();
                }
                if (scratch != null) {
                    scratch.close();
                }
            }
        }

        private void fail(String problem) {
            failure.compareAndSet(null, problem);
            failed.countDown();
        }

        private String plainBatch() {
            int rc = transfer(o.write(), src, primary);
            return rc == 0 ? null : String.format(Locale.ROOT, "worker %d: %s batch returned %d", thread,
                    o.operation(), rc);
        }

        private String verifiedBatch(long batch) {
            long seed = mix(((long) thread << 40) ^ batch);
            MemorySegment pattern = local != null ? local : scratch.segment();
            for (int i = 0; i < offsets.length; i++) {
                fill(pattern, patternOffset(i), lengths[i], seed ^ i);
            }
            if (copier != null) {
                String problem = stage(true);
                if (problem != null) {
                    return String.format(Locale.ROOT, "worker %d batch %d: %s", thread, batch, problem);
                }
            }
            int rc = transfer(true, src, verifyWrite);
            if (rc != 0) {
                return String.format(Locale.ROOT, "worker %d batch %d: write returned %d", thread, batch, rc);
            }
            rc = transfer(false, readBack, verifyRead);
            if (rc != 0) {
                return String.format(Locale.ROOT, "worker %d batch %d: read-back returned %d", thread, batch, rc);
            }
            if (copier != null) {
                String problem = stage(false);
                if (problem != null) {
                    return String.format(Locale.ROOT, "worker %d batch %d: %s", thread, batch, problem);
                }
            }
            long half = local != null ? readBack[0] - src[0] : (long) o.batchSize() * o.blockSize();
            for (int i = 0; i < offsets.length; i++) {
                long a = patternOffset(i);
                long b = a + half;
                long m = MemorySegment.mismatch(pattern, a, a + lengths[i], pattern, b, b + lengths[i]);
                if (m >= 0) {
                    return String.format(Locale.ROOT, "worker %d batch %d: block %d (remote 0x%x) differs at byte %d:"
                            + " wrote 0x%02x, read back 0x%02x", thread, batch, i, dst[i], m,
                            pattern.get(ValueLayout.JAVA_BYTE, a + m), pattern.get(ValueLayout.JAVA_BYTE, b + m));
                }
            }
            return null;
        }

        /** Where block {@code i}'s pattern is: in the host buffer, or (GPU buffer) in the first half of the scratch. */
        private long patternOffset(int i) {
            return local != null ? offsets[i] : (long) i * o.blockSize();
        }

        /**
         * GPU buffer: copies the batch's patterns from the scratch into the GPU blocks ({@code toDevice}), or
         * the read-back GPU blocks into the second half of the scratch; null when done, else the problem.
         */
        private String stage(boolean toDevice) {
            long base = scratch.address();
            long half = (long) o.batchSize() * o.blockSize();
            try {
                for (int i = 0; i < offsets.length; i++) {
                    if (toDevice) {
                        copier.toDevice(src[i], base + patternOffset(i), lengths[i]);
                    } else {
                        copier.toHost(base + half + patternOffset(i), readBack[i], lengths[i]);
                    }
                }
                copier.synchronize();
                return null;
            } catch (IllegalStateException e) {
                return (toDevice ? "staging the pattern to the GPU: " : "staging the read-back from the GPU: ")
                        + e.getMessage();
            }
        }

        /** One batch through the chosen API; 0 when every request completed. */
        private int transfer(boolean write, long[] localAddrs, List<TransferRequest> requests) {
            if (o.api().equals("sync")) {
                return write ? engine.batchTransferSyncWrite(segmentName, localAddrs, dst, lengths)
                        : engine.batchTransferSyncRead(segmentName, localAddrs, dst, lengths);
            }
            long id = engine.allocateBatchId(requests.size());
            if (id < 0) {
                return (int) id;
            }
            int rc = engine.submitTransfer(id, requests);
            if (rc != 0) {
                engine.freeBatchId(id);
                return rc;
            }
            int result = 0;
            for (int task = 0; task < requests.size(); task++) {
                while (true) {
                    TransferStatus s = engine.getTransferStatus(id, task);
                    if (s.code() != 0) {
                        return s.code();
                    }
                    if (s.state() == TransferStatus.State.COMPLETED) {
                        break;
                    }
                    if (s.state().isTerminal()) {
                        result = -1;
                        break;
                    }
                    Thread.onSpinWait();
                }
            }
            int freed = engine.freeBatchId(id);
            return result != 0 ? result : freed;
        }

        private static long mix(long z) {
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }

        /** A pattern that depends on the seed and on every 8-byte position, so shifted or stale data shows. */
        private static void fill(MemorySegment seg, long offset, long length, long seed) {
            long i = 0;
            long base = mix(seed);
            for (; i + 8 <= length; i += 8) {
                seg.set(ValueLayout.JAVA_LONG_UNALIGNED, offset + i, base + i * 0x9E3779B97F4A7C15L);
            }
            for (; i < length; i++) {
                seg.set(ValueLayout.JAVA_BYTE, offset + i, (byte) (base >>> (8 * (i & 7)) ^ i));
            }
        }
    }
}
