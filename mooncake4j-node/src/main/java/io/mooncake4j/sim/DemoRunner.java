package io.mooncake4j.sim;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.ModelPreset;

import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@code bin/mooncake4j demo} runs: a bootstrap server, a P engine and a D engine in this
 * JVM on loopback, a proxy sending a synthetic workload through them, byte verification of every
 * prompt token's KV at D, progress lines while it runs and a summary at the end.
 *
 * <p>Memory is bounded by the two engines' block pools (by default at most
 * {@link #DEFAULT_KV_BUDGET_BYTES} of KV per engine) and by the concurrency: requests cycle
 * through the pools.
 *
 * <p>With {@code device} {@code cuda} the KV caches of P's ranks are on GPU {@code pGpu} and D's on
 * {@code dGpu}, allocated and reached through a {@link DeviceMemory}; the synthetic model writes and
 * verifies them through host scratch and bulk copies, and the workers' transfer engines must reach
 * GPU memory (the TCP engine stages it through pinned host buffers). Everything else is unchanged.
 */
public final class DemoRunner {

    private static final Logger LOG = LoggerFactory.getLogger(DemoRunner.class);

    /** KV memory per engine when {@code numBlocks} is 0 (auto). */
    public static final long DEFAULT_KV_BUDGET_BYTES = 2L << 30;

    /**
     * The demo's knobs.
     *
     * @param model              model shape
     * @param requests           requests to send
     * @param promptTokens       tokens per prompt
     * @param sharedPrefixTokens leading tokens common to all prompts (prefix-cache hits)
     * @param decodeTokens       tokens each D request generates
     * @param pTp                P engine TP size
     * @param dTp                D engine TP size
     * @param protocol           {@code tcp}, or {@code mock} for the in-JVM engine
     * @param numBlocks          blocks per rank of each engine; 0 = auto ({@link #blocksFor})
     * @param concurrency        requests in flight at once
     * @param seed               workload seed
     * @param timeout            bound on the whole run
     * @param device             where the KV caches live: {@code cpu} (host memory) or {@code cuda}
     * @param pGpu               with {@code cuda}: the GPU of every P rank
     * @param dGpu               with {@code cuda}: the GPU of every D rank
     * @param layerwise          P pushes each layer's KV as its prefill writes it ({@code layerwise_push})
     * @param layerCompute       the prefill's compute per layer per 1024 prompt tokens
     *                           ({@link SimEngine#layerCompute}); zero: the KV fill only
     * @param sampling           how both engines' synthetic model picks tokens: {@link SimEngine.Sampling#PROMPT}
     *                           (the demo's default: from the prompt alone, D verifies the KV it received) or
     *                           {@link SimEngine.Sampling#KV} (as {@code serve} nodes: from the KV each engine
     *                           holds, so P also digests the KV it writes; like for like with
     *                           {@code demo --processes})
     */
    public record Options(ModelPreset model, int requests, int promptTokens, int sharedPrefixTokens,
                          int decodeTokens, int pTp, int dTp, String protocol, int numBlocks, int concurrency,
                          long seed, Duration timeout, String device, int pGpu, int dGpu, boolean layerwise,
                          Duration layerCompute, SimEngine.Sampling sampling) {

        public Options {
            Objects.requireNonNull(sampling, "sampling");
            Objects.requireNonNull(layerCompute, "layerCompute");
            if (layerCompute.isNegative()) {
                throw new IllegalArgumentException("layer compute must be >= 0, got " + layerCompute);
            }
            Objects.requireNonNull(model, "model");
            Objects.requireNonNull(protocol, "protocol");
            Objects.requireNonNull(timeout, "timeout");
            Objects.requireNonNull(device, "device");
            if (!device.equals("cpu") && !device.equals("cuda")) {
                throw new IllegalArgumentException("device must be cpu or cuda, got '" + device + "'");
            }
            if (pGpu < 0 || dGpu < 0) {
                throw new IllegalArgumentException("GPU indices must be >= 0, got " + pGpu + ", " + dGpu);
            }
            if (device.equals("cuda") && protocol.equals("mock")) {
                throw new IllegalArgumentException("KV caches on the GPU need the tcp protocol: the mock engine "
                        + "copies KV with the CPU and would touch GPU memory directly");
            }
            if (requests <= 0 || promptTokens <= 0 || decodeTokens <= 0 || pTp <= 0 || dTp <= 0 || numBlocks < 0
                    || concurrency <= 0) {
                throw new IllegalArgumentException("requests, prompt tokens, decode tokens, TP sizes and concurrency "
                        + "must be positive, num-blocks >= 0");
            }
            if (sharedPrefixTokens < 0 || sharedPrefixTokens > promptTokens) {
                throw new IllegalArgumentException("shared prefix must be within 0.." + promptTokens);
            }
        }

        /** Options with tokens sampled from the prompt ({@link SimEngine.Sampling#PROMPT}, the demo's default). */
        public Options(ModelPreset model, int requests, int promptTokens, int sharedPrefixTokens, int decodeTokens,
                int pTp, int dTp, String protocol, int numBlocks, int concurrency, long seed, Duration timeout,
                String device, int pGpu, int dGpu, boolean layerwise, Duration layerCompute) {
            this(model, requests, promptTokens, sharedPrefixTokens, decodeTokens, pTp, dTp, protocol, numBlocks,
                    concurrency, seed, timeout, device, pGpu, dGpu, layerwise, layerCompute, SimEngine.Sampling.PROMPT);
        }

        /** Options with whole-request push and no per-layer compute cost. */
        public Options(ModelPreset model, int requests, int promptTokens, int sharedPrefixTokens, int decodeTokens,
                int pTp, int dTp, String protocol, int numBlocks, int concurrency, long seed, Duration timeout,
                String device, int pGpu, int dGpu) {
            this(model, requests, promptTokens, sharedPrefixTokens, decodeTokens, pTp, dTp, protocol, numBlocks,
                    concurrency, seed, timeout, device, pGpu, dGpu, false, Duration.ZERO);
        }

        /** Options with KV caches in host memory ({@code device} {@code cpu}). */
        public Options(ModelPreset model, int requests, int promptTokens, int sharedPrefixTokens, int decodeTokens,
                int pTp, int dTp, String protocol, int numBlocks, int concurrency, long seed, Duration timeout) {
            this(model, requests, promptTokens, sharedPrefixTokens, decodeTokens, pTp, dTp, protocol, numBlocks,
                    concurrency, seed, timeout, "cpu", 0, 0);
        }

        /** Whether the KV caches are on GPUs. */
        public boolean onGpu() {
            return device.equals("cuda");
        }

        /** The defaults of {@code bin/mooncake4j demo}: 64 Llama-3-8B requests of 2k tokens over TCP. */
        public static Options defaults() {
            return new Options(ModelPreset.LLAMA_3_8B, 64, 2048, 256, 4, 1, 1, "tcp", 0, 4, 42,
                    Duration.ofMinutes(10));
        }

        /**
         * Blocks per rank: the given count, or (auto) what fits {@link #DEFAULT_KV_BUDGET_BYTES} on an
         * engine of {@code tp} ranks, but no more than four times what the requests in flight need,
         * so that requests cycle through the pool whatever the model size.
         */
        public int blocksFor(int tp) {
            if (numBlocks > 0) {
                return numBlocks;
            }
            long perBlock = (long) model.numLayers() * model.pageBytes(tp) * tp;
            long budget = DEFAULT_KV_BUDGET_BYTES / perBlock;
            int bs = model.blockSize();
            long perRequest = (promptTokens + decodeTokens - 1 + bs - 1) / bs;
            long enough = 4L * concurrency * perRequest;
            return (int) Math.min(Integer.MAX_VALUE, Math.max(Math.min(budget, enough), Math.min(budget, perRequest)));
        }
    }

    /**
     * Creates the worker factories of the demo's engines.
     */
    @FunctionalInterface
    public interface Workers {
        /** The factory for engine {@code config} (its TP rank is set per worker), using {@code protocol}. */
        SimEngine.WorkerFactory factory(String protocol);
    }

    /**
     * The outcome.
     *
     * @param options           what ran
     * @param ok                requests that finished with verified KV
     * @param failed            requests that failed (load error, mismatch, engine error, timeout)
     * @param promptTokens      prompt tokens sent
     * @param dHitTokens        prompt tokens D found in its own prefix cache
     * @param generatedTokens   tokens D generated
     * @param bytesMoved        KV bytes written into D's blocks
     * @param bytesVerified     KV bytes verified at D
     * @param mismatchedWords   8-byte words that did not verify
     * @param transferP50Ms     P end of prefill → D KV ready, median
     * @param transferP99Ms     same, 99th percentile
     * @param requestP50Ms      proxy submit → D finished, median
     * @param requestP99Ms      same, 99th percentile
     * @param wallSeconds       duration of the run
     * @param pStats            P's connector stats ({@code reduce()})
     * @param dStats            D's connector stats ({@code reduce()})
     * @param errors            the first few error messages
     * @param cpuSeconds        CPU time (user + system) this process spent during the run, or -1 when unknown
     */
    public record Report(Options options, int ok, int failed, long promptTokens, long dHitTokens,
                         long generatedTokens, long bytesMoved, long bytesVerified, long mismatchedWords,
                         double transferP50Ms, double transferP99Ms, double requestP50Ms, double requestP99Ms,
                         double wallSeconds, Map<String, Number> pStats, Map<String, Number> dStats,
                         List<String> errors, double cpuSeconds) {

        /** 0 when every request verified, 1 otherwise. */
        public int exitCode() {
            return failed == 0 && mismatchedWords == 0 && ok == options.requests() ? 0 : 1;
        }

        /** The final table. */
        public void print(PrintStream out) {
            print(out, Map.of());
        }

        /**
         * The final table with {@code extraRows} (label to text, in their order) after the CPU time.
         *
         * @param out       where to print
         * @param extraRows rows the caller measured outside the run (e.g. bytes per transport)
         */
        public void print(PrintStream out, Map<String, String> extraRows) {
            Options o = options;
            out.printf(Locale.ROOT, "%nmooncake4j demo: %s, P tp %d -> D tp %d, protocol %s, %d requests x %d tokens "
                    + "(%d shared), %d decode tokens%n", o.model().name(), o.pTp(), o.dTp(), o.protocol(),
                    o.requests(), o.promptTokens(), o.sharedPrefixTokens(), o.decodeTokens());
            if (o.sampling() == SimEngine.Sampling.KV) {
                row(out, "sampling", "kv: tokens from the KV each engine holds (P digests the KV it writes, D the "
                        + "KV it received), as serve nodes do");
            }
            row(out, "KV caches", o.onGpu() ? String.format(Locale.ROOT, "GPU: P on cuda:%d, D on cuda:%d", o.pGpu(),
                    o.dGpu()) : "host memory");
            row(out, "requests", String.format(Locale.ROOT, "%d ok, %d failed", ok, failed));
            row(out, "prompt tokens", String.format(Locale.ROOT, "%d (%d served from D's prefix cache)",
                    promptTokens, dHitTokens));
            row(out, "generated tokens", Long.toString(generatedTokens));
            row(out, "KV bytes moved", String.format(Locale.ROOT, "%s (%d bytes)", Bytes.human(bytesMoved), bytesMoved));
            row(out, "KV bytes verified", String.format(Locale.ROOT, "%s, %d mismatched 8-byte words",
                    Bytes.human(bytesVerified), mismatchedWords));
            row(out, "transfer latency", String.format(Locale.ROOT, "p50 %.1f ms, p99 %.1f ms "
                    + "(P prefill done -> D KV ready)", transferP50Ms, transferP99Ms));
            row(out, "request latency", String.format(Locale.ROOT, "p50 %.1f ms, p99 %.1f ms", requestP50Ms,
                    requestP99Ms));
            double secs = Math.max(wallSeconds, 1e-9);
            row(out, "throughput", String.format(Locale.ROOT, "%s/s of KV, %.1f requests/s, %.1f s wall",
                    Bytes.human((long) (bytesMoved / secs)), ok / secs, wallSeconds));
            if (cpuSeconds >= 0 && bytesMoved > 0) {
                row(out, "CPU time", String.format(Locale.ROOT, "%.1f s in this process over the run, %.2f s per GiB "
                        + "of KV", cpuSeconds, cpuSeconds / (bytesMoved / (double) (1L << 30))));
            }
            extraRows.forEach((k, v) -> row(out, k, v));
            row(out, "failures", Integer.toString(failed));
            printStats(out, "connector stats P", pStats);
            printStats(out, "connector stats D", dStats);
            for (String e : errors) {
                out.println("  error: " + e);
            }
            out.println(exitCode() == 0 ? "OK: every byte verified" : "FAILED");
        }

        private static void row(PrintStream out, String k, String v) {
            out.printf(Locale.ROOT, "  %-20s %s%n", k, v);
        }

        private static void printStats(PrintStream out, String title, Map<String, Number> m) {
            out.println("  " + title + " (reduce()):");
            m.forEach((k, v) -> out.printf(Locale.ROOT, "    %-28s %s%n", k, v));
        }
    }

    private DemoRunner() {}

    /**
     * Runs the demo with KV caches in host memory.
     *
     * @param workers  creates each engine's workers for the protocol
     * @param progress where the one-line-per-second progress goes
     * @throws IllegalArgumentException when {@code o} asks for GPU memory (use the other overload)
     */
    public static Report run(Options o, Workers workers, PrintStream progress) {
        return run(o, workers, progress, null);
    }

    /**
     * Runs the demo; with {@code o.device()} {@code cuda} the KV caches are allocated and reached
     * through {@code deviceMemory} (whose locations are checked first: a GPU that cannot be used
     * throws, with the cause and the fix, before anything is started), and {@code workers} must
     * create transfer engines that reach that memory.
     *
     * @param deviceMemory GPU memory for {@code cuda}; ignored (may be null) for {@code cpu}
     */
    public static Report run(Options o, Workers workers, PrintStream progress, DeviceMemory deviceMemory) {
        boolean shm = o.protocol().equals("auto") || o.protocol().equals("shm");
        SimEngine.KvPlacement pPlace = shm ? SimEngine.KvPlacement.sharedHost() : SimEngine.KvPlacement.host();
        SimEngine.KvPlacement dPlace = shm ? SimEngine.KvPlacement.sharedHost() : SimEngine.KvPlacement.host();
        if (o.onGpu()) {
            if (deviceMemory == null) {
                throw new IllegalArgumentException("KV caches on the GPU need a DeviceMemory");
            }
            deviceMemory.checkLocation("cuda:" + o.pGpu());
            deviceMemory.checkLocation("cuda:" + o.dGpu());
            pPlace = SimEngine.KvPlacement.gpu(deviceMemory, o.pGpu());
            dPlace = SimEngine.KvPlacement.gpu(deviceMemory, o.dGpu());
        }
        int pBlocks = o.blocksFor(o.pTp());
        int dBlocks = o.blocksFor(o.dTp());
        int bs = o.model().blockSize();
        int need = (o.promptTokens() + o.decodeTokens() - 1 + bs - 1) / bs;
        if (need > Math.min(pBlocks, dBlocks)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "one request needs %d blocks but the engines have %d (P) and %d (D); raise --num-blocks or "
                            + "lower --prompt-tokens", need, pBlocks, dBlocks));
        }
        Workload workload = new Workload(o.promptTokens(), o.sharedPrefixTokens(), o.seed());
        SimEngine.Limits limits = new SimEngine.Limits(Math.max(o.concurrency(), 1), 8192);
        try (MooncakeBootstrapServer bootstrap = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            bootstrap.start();
            String bootstrapHostPort = "127.0.0.1:" + bootstrap.port();
            String url = BootstrapAddresses.httpUrl("127.0.0.1", bootstrap.port());
            MooncakeConnectorConfig.Builder base = MooncakeConnectorConfig.builder()
                    .protocol(o.protocol().equals("mock") ? "tcp" : o.protocol())
                    .hostname("127.0.0.1")
                    .numWorkers(2)
                    .bootstrapServerAddress(bootstrapHostPort)
                    .abortRequestTimeout(Duration.ofSeconds(60));
            MooncakeConnectorConfig pCfg = base.kvRole(KvRole.KV_PRODUCER).engineId("demo-prefill")
                    .tp(0, o.pTp()).layerwisePush(o.layerwise()).build();
            MooncakeConnectorConfig dCfg = base.kvRole(KvRole.KV_CONSUMER).engineId("demo-decode")
                    .tp(0, o.dTp()).build();
            try (SimEngine p = SimEngine.start(pCfg, o.model(), pBlocks, limits, workers.factory(o.protocol()), pPlace,
                    o.sampling());
                 SimEngine d = SimEngine.start(dCfg, o.model(), dBlocks, limits, workers.factory(o.protocol()),
                         dPlace, o.sampling())) {
                p.layerCompute(o.layerCompute());
                String engineId = SimProxy.resolveEngineId(url, 0);
                progress.printf(Locale.ROOT, "bootstrap server %s; P %s: tp %d, %d blocks/rank, %s KV in %s; "
                        + "D %s: tp %d, %d blocks/rank, %s KV in %s%n", url, engineId, o.pTp(), pBlocks,
                        Bytes.human(p.kvBytes()), pPlace, d.engineId(), o.dTp(), dBlocks, Bytes.human(d.kvBytes()),
                        dPlace);
                return drive(o, new SimProxy(p, d, url, engineId), workload, p, d, progress);
            }
        }
    }

    private static Report drive(Options o, SimProxy proxy, Workload workload, SimEngine p, SimEngine d,
            PrintStream progress) {
        Semaphore inFlight = new Semaphore(o.concurrency());
        ConcurrentLinkedQueue<SimProxy.Exchange> done = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicLong failedCount = new AtomicLong();
        AtomicLong moved = new AtomicLong();
        long[] submitNanos = new long[o.requests()];
        long[] finishNanos = new long[o.requests()];
        long cpuStart = processCpuNanos();
        long start = System.nanoTime();
        long deadline = start + o.timeout().toNanos();
        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "mooncake-demo-progress-0");
            t.setDaemon(true);
            return t;
        });
        List<CompletableFuture<?>> all = new ArrayList<>();
        try {
            ticker.scheduleAtFixedRate(() -> printProgress(progress, start, o, done.size(), failedCount.get(),
                    moved.get(), p, d), 1, 1, TimeUnit.SECONDS);
            for (int i = 0; i < o.requests(); i++) {
                long left = deadline - System.nanoTime();
                if (left <= 0 || !inFlight.tryAcquire(left, TimeUnit.NANOSECONDS)) {
                    errors.add("timed out after " + o.timeout() + " before sending request " + i);
                    break;
                }
                final int idx = i;
                submitNanos[i] = System.nanoTime();
                CompletableFuture<SimProxy.Exchange> f;
                try {
                    f = proxy.submit("demo-" + i, workload.prompt(i), o.decodeTokens());
                } catch (RuntimeException e) {
                    inFlight.release();
                    throw e;
                }
                all.add(f.whenComplete((x, err) -> {
                    finishNanos[idx] = System.nanoTime();
                    if (err != null) {
                        failedCount.incrementAndGet();
                        if (errors.size() < 5) {
                            errors.add("request " + idx + ": " + err);
                        }
                    } else {
                        moved.addAndGet(x.decode().bytesReceived());
                        if (!x.ok()) {
                            failedCount.incrementAndGet();
                            if (errors.size() < 5) {
                                errors.add("request " + idx + " (" + x.transferId() + "): "
                                        + (x.decode().error() != null ? x.decode().error()
                                        : x.prefill().error() != null ? x.prefill().error()
                                        : "first tokens differ: P " + Arrays.toString(x.prefill().outputTokens())
                                        + ", D " + Arrays.toString(x.decode().outputTokens())));
                            }
                        }
                        done.add(x);
                    }
                    inFlight.release();
                }));
            }
            CompletableFuture<Void> every = CompletableFuture.allOf(all.toArray(CompletableFuture[]::new));
            try {
                every.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                errors.add("timed out after " + o.timeout() + " with " + (o.requests() - done.size())
                        + " requests unfinished");
            } catch (java.util.concurrent.ExecutionException e) {
                LOG.debug("a request failed; counted in the report", e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                errors.add("interrupted");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            errors.add("interrupted");
        } finally {
            ticker.shutdownNow();
        }
        double wall = (System.nanoTime() - start) / 1e9;
        long cpuEnd = processCpuNanos();
        printProgress(progress, start, o, done.size(), failedCount.get(), moved.get(), p, d);
        List<SimProxy.Exchange> xs = List.copyOf(done);
        int ok = (int) xs.stream().filter(SimProxy.Exchange::ok).count();
        int failed = o.requests() - ok;
        double[] transfer = xs.stream().filter(SimProxy.Exchange::ok)
                .mapToDouble(x -> x.transferLatencyNanos() / 1e6).sorted().toArray();
        double[] req = new double[all.size()];
        for (int i = 0; i < req.length; i++) {
            req[i] = finishNanos[i] == 0 ? Double.NaN : (finishNanos[i] - submitNanos[i]) / 1e6;
        }
        double[] reqSorted = Arrays.stream(req).filter(v -> !Double.isNaN(v)).sorted().toArray();
        // an engine takes its workers' connector stats at each step: a transfer P recorded just before D's
        // last answer reaches p.kvConnectorStats() only at P's next step (a failed one was seen missing)
        awaitWholeStep(p);
        awaitWholeStep(d);
        MooncakeKvConnectorStats ps = p.kvConnectorStats();
        MooncakeKvConnectorStats ds = d.kvConnectorStats();
        return new Report(o, ok, failed,
                xs.stream().mapToLong(x -> x.decode().promptTokens()).sum(),
                xs.stream().mapToLong(x -> x.decode().localHitTokens()).sum(),
                xs.stream().mapToLong(x -> x.decode().outputTokens().length).sum(),
                xs.stream().mapToLong(x -> x.decode().bytesReceived()).sum(),
                xs.stream().mapToLong(x -> x.decode().bytesVerified()).sum(),
                xs.stream().mapToLong(x -> x.decode().mismatchedWords()).sum(),
                percentile(transfer, 50), percentile(transfer, 99), percentile(reqSorted, 50),
                percentile(reqSorted, 99), wall, ps.reduce(), ds.reduce(), List.copyOf(errors),
                cpuStart < 0 || cpuEnd < 0 ? -1 : (cpuEnd - cpuStart) / 1e9);
    }

    /** CPU time (user + system) of this process so far, or -1 when the platform does not tell. */
    /** Waits, at most 2 s, until {@code e} ran a step that began after this call (an idle engine steps every 50 ms). */
    private static void awaitWholeStep(SimEngine e) {
        long target = e.snapshot().steps() + 2;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
        while (e.snapshot().steps() < target && e.failure() == null && System.nanoTime() - deadline < 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    private static long processCpuNanos() {
        return ProcessHandle.current().info().totalCpuDuration().map(java.time.Duration::toNanos).orElse(-1L);
    }

    /** Nearest-rank percentile of sorted values; 0 when empty. */
    static double percentile(double[] sorted, double pct) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(pct / 100.0 * sorted.length);
        return sorted[Math.min(sorted.length, Math.max(rank, 1)) - 1];
    }

    private static void printProgress(PrintStream out, long start, Options o, int done, long failed, long moved,
            SimEngine p, SimEngine d) {
        double t = (System.nanoTime() - start) / 1e9;
        SimEngine.Snapshot ps = p.snapshot();
        SimEngine.Snapshot ds = d.snapshot();
        out.printf(Locale.ROOT, "[%6.1fs] %d/%d done, %d failed | P: prefill %d, to send %d, free %d/%d "
                + "| D: loading %d, decoding %d, free %d/%d | %s moved, %s/s%n",
                t, done, o.requests(), failed, ps.running() + ps.waiting(), ps.delayedFree(), ps.freeBlocks(),
                p.numBlocks(), ds.loadingRemoteKv(), ds.running(), ds.freeBlocks(), d.numBlocks(),
                Bytes.human(moved), Bytes.human((long) (moved / Math.max(t, 1e-9))));
    }
}
