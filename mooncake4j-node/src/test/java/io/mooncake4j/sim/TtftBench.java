package io.mooncake4j.sim;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.internal.sys.ThreadTuning;
import io.mooncake4j.memory.ModelPreset;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Time to first token at D with and without layer-wise push, one request at a time,
 * Llama-3-8B shape, through the reference serving engine and the real connector. Not a test (no
 * assertions); per engine kind and prompt size it measures, in the same run and same engines:
 * <ul>
 *   <li>{@code fill}: P's prefill with the synthetic KV fill only (no compute cost);</li>
 *   <li>{@code transfer}: D's load of a request P already prefilled (D arrival → D KV ready);</li>
 *   <li>the per-layer compute cost is then set so that prefill ≈ transfer
 *       ({@code (transfer - fill) / layers}, per 1k tokens), the case where overlap matters most;</li>
 *   <li>{@code prefill}: P's prefill with that cost, alone;</li>
 *   <li>{@code ttft whole} / {@code ttft layerwise}: P start → D KV ready, P and D requests sent
 *       together as the proxy does, whole-request push vs {@code layerwise_push};</li>
 *   <li>{@code lw pref} / {@code lw tail}: inside the layer-wise exchanges, P's prefill (arrival →
 *       KV ready at P) and what D still waited after it (P KV ready → D KV ready).</li>
 * </ul>
 * Medians of {@code reps} runs. Run:
 *
 * <pre>
 * mvn -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -Xmx6g -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.sim.TtftBench [reps] [mock,tcp] [1024,8192,32768] [balanced|gpu]
 * </pre>
 *
 * <p>Options ({@code -D}):
 * <ul>
 *   <li>{@code ttft.nice=N}: both P engines get {@code transfer_thread_nice: N} (P's transfer-pool
 *       threads, and the TCP lanes they start, at nice N);</li>
 *   <li>{@code ttft.dNice=N} (0..19, default 0): D is started on a thread at nice N, so every thread
 *       D starts inherits it (its step loop, its connector worker's threads, its engine's and the
 *       TCP target sessions that receive P's writes). The closest this 2-core machine comes to D on
 *       a host of its own: D's threads take only the cores P's threads leave. Not the same: they
 *       still share the cores, and on a loaded machine a niced thread also yields to every other
 *       process. The row's next lines list every thread at a nice value other than 0;</li>
 *   <li>{@code ttft.warmup=N} (default 5): exchanges that warm each P up first;</li>
 *   <li>{@code ttft.jitSettle} (default true): then rounds of all the code the cell measures (with
 *       the whole-request P: prefill alone, transfer alone, exchange, again once the per-layer cost
 *       is set; with the layer-wise P: prefill alone and the instrumented exchange) in pairs, until
 *       the JIT compiler threads were on a CPU for at most 1 % of a pair's wall time, at most
 *       {@code ttft.jitSettleMax} pairs (40) or {@code ttft.jitSettleSeconds} (30) per phase: a
 *       server past its first requests has compiled that code. {@code false}: the fixed warm-up only;</li>
 *   <li>{@code ttft.verbose=true}: every exchange is printed.</li>
 * </ul>
 * After each row: the JIT compilers' CPU while the cell was measured (the {@code jit ms} column)
 * and inside each kind of window, and the settling rounds each phase took; the threads at a nice
 * value other than 0; the medians of where P's prefill time went, alone and inside the layer-wise
 * exchanges ({@link Evidence}: the step thread's on-CPU time, run-queue wait and parked time from
 * the kernel's schedstat, its fill / device-wait / hook split, the other thread groups' CPU over
 * the same window), every thread group over the windows, and the floors this machine puts on the
 * cell.
 */
public final class TtftBench {

    private static final ModelPreset MODEL = ModelPreset.LLAMA_3_8B;
    private static final SplittableRandom RANDOM = new SplittableRandom(13);

    /** Cost model: parked compute alone equals the transfer (else fill + compute does). */
    private static boolean gpuLike;

    private TtftBench() {
    }

    public static void main(String[] args) throws Exception {
        int reps = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        String[] kinds = (args.length > 1 ? args[1] : "mock,tcp").split(",");
        int[] sizes = Arrays.stream((args.length > 2 ? args[2] : "1024,8192,32768").split(","))
                .mapToInt(Integer::parseInt).toArray();
        gpuLike = args.length > 3 && args[3].equals("gpu");
        // the instrument itself compiled before anything is measured (else the JIT compiles it inside the windows)
        ThreadTimes w0 = ThreadTimes.snapshot();
        for (int i = 0; i < SNAPSHOT_WARMUP; i++) {
            ThreadTimes.snapshot().since(w0);
        }
        System.out.println("per-layer cost: " + (gpuLike ? "gpu (parked compute alone = transfer time; the CPU KV "
                + "fill comes on top)" : "balanced (fill + parked compute = transfer time)")
                + "; P's transfer_thread_nice " + Integer.getInteger("ttft.nice", 0) + " (-Dttft.nice); D's threads at nice "
                + D_NICE + " (-Dttft.dNice); warm-up " + WARMUP + " exchanges per P" + (JIT_SETTLE
                        ? ", then rounds of the cell's code until the JIT compiler threads were on a CPU for <= "
                        + SETTLE_PERCENT + " % of two rounds, at most " + SETTLE_MAX + " pairs or " + SETTLE_SECONDS
                        + " s (-Dttft.jitSettle=false: not)"
                        : ", no JIT settling (-Dttft.jitSettle=false)"));
        System.out.println("link: " + LINK + " (-Dttft.link; scripts/ttft-link.sh sets it to the tbf rate of the namespace's "
                + "loopback); the xfer GB/s after each row is the transfer alone's own rate on it");
        startCarriers();
        System.out.printf(Locale.ROOT, "%-5s %7s %9s %9s %11s %9s %9s %9s %10s %9s %9s %11s %10s %8s%n", "engine",
                "tokens", "fill ms", "xfer ms", "us/layer/1k", "pref ms", "whole ms", "lw ms", "max(p,x)", "whole/max",
                "lw/max", "lw pref ms", "lw tail ms", "jit ms");
        for (String kind : kinds) {
            for (int tokens : sizes) {
                run(kind, tokens, reps);
            }
        }
    }

    private static int[] prompt(int tokens) {
        int[] p = new int[tokens];
        for (int i = 0; i < tokens; i++) {
            p[i] = RANDOM.nextInt(1, 32000);
        }
        return p;
    }

    private static double median(List<Double> xs) {
        double[] a = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    private static void run(String kind, int tokens, int reps) throws Exception {
        int blocks = (tokens + MODEL.blockSize() - 1) / MODEL.blockSize() + 4;
        SimEngine.Limits limits = new SimEngine.Limits(4, 8192);
        MooncakeConnectorConfig.Builder base = MooncakeConnectorConfig.builder().protocol("tcp")
                .hostname("127.0.0.1").numWorkers(2).abortRequestTimeout(Duration.ofSeconds(30))
                .transferThreadNice(Integer.getInteger("ttft.nice", 0));
        MooncakeConnectorConfig dCfg = base.kvRole(KvRole.KV_CONSUMER).engineId("bench-d").tp(0, 1).build();
        double fill;
        double xfer;
        double prefill;
        double whole;
        double lw;
        double lwPrefill = Double.NaN;
        double lwTail = Double.NaN;
        long perLayer1k;
        List<Evidence> aloneEv = new ArrayList<>();
        // per measured layer-wise exchange: {lw ms, that P's prefill alone just before, its transfer alone just before}
        List<double[]> paired = new ArrayList<>();
        List<Evidence> lwEv = new ArrayList<>();
        List<Window> xferWin = new ArrayList<>();
        List<Window> lwWin = new ArrayList<>();
        String load0 = loadAverage();
        JitAccount jit = new JitAccount();
        String nice = "";
        // both bootstrap servers live through the run: D caches what a bootstrap address resolved to, and a
        // second server on a reused port would hand it the first P's stale side channel
        try (SimEngine d = startD(dCfg, blocks, limits, kind);
             MooncakeBootstrapServer bsWhole = new MooncakeBootstrapServer("127.0.0.1", 0);
             MooncakeBootstrapServer bsLw = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            d.onKvLoaded(TtftBench::snapshotOnKvLoaded);
            bsWhole.start();
            bsLw.start();
            {
                MooncakeBootstrapServer bs = bsWhole;
                String url = BootstrapAddresses.httpUrl("127.0.0.1", bs.port());
                MooncakeConnectorConfig pCfg = base.kvRole(KvRole.KV_PRODUCER).engineId("bench-p-whole")
                        .bootstrapServerAddress("127.0.0.1:" + bs.port()).layerwisePush(false).build();
                try (SimEngine p = SimEngine.start(pCfg, MODEL, blocks, limits, workers(kind))) {
                    String engineId = SimProxy.resolveEngineId(url, 0);
                    SimProxy proxy = new SimProxy(p, d, url, engineId);
                    for (int i = 0; i < WARMUP; i++) {
                        warmUp(proxy, tokens); // connections, JIT
                    }
                    // every piece of code measured below, until the compilers are (nearly) idle
                    jit.settle(() -> {
                        prefillAlone(p, tokens);
                        transferAlone(p, d, engineId, url, tokens);
                        exchange(proxy, tokens);
                    });
                    jit.measureStart();
                    List<Double> f = new ArrayList<>();
                    List<Double> x = new ArrayList<>();
                    for (int r = 0; r < reps; r++) {
                        f.add(prefillAlone(p, tokens));
                        Window xw = transferAlone(p, d, engineId, url, tokens);
                        x.add(xw.wallMs());
                        xferWin.add(xw);
                    }
                    fill = median(f);
                    xfer = median(x);
                    double compute = gpuLike ? xfer : Math.max(0, xfer - fill);
                    perLayer1k = (long) (compute * 1e6 / MODEL.numLayers() / (tokens / 1024.0));
                    p.layerCompute(Duration.ofNanos(perLayer1k));
                    jit.measureStop();
                    jit.settle(() -> { // the same with the per-layer cost (another branch of the forward pass)
                        prefillAlone(p, tokens);
                        exchange(proxy, tokens);
                    });
                    jit.measureStart();
                    List<Double> pr = new ArrayList<>();
                    List<Double> w = new ArrayList<>();
                    for (int r = 0; r < reps; r++) {
                        pr.add(prefillAlone(p, tokens));
                        w.add(exchange(proxy, tokens));
                    }
                    jit.measureStop();
                    prefill = median(pr);
                    whole = median(w);
                }
            }
            {
                MooncakeBootstrapServer bs = bsLw;
                String url = BootstrapAddresses.httpUrl("127.0.0.1", bs.port());
                MooncakeConnectorConfig pCfg = base.kvRole(KvRole.KV_PRODUCER).engineId("bench-p-layerwise")
                        .bootstrapServerAddress("127.0.0.1:" + bs.port()).layerwisePush(true).build();
                lw = Double.NaN;
                for (int attempt = 0; attempt < 3 && Double.isNaN(lw); attempt++) {
                    try (SimEngine p = SimEngine.start(pCfg, MODEL, blocks, limits, workers(kind))) {
                        p.layerCompute(Duration.ofNanos(perLayer1k));
                        String lwEngineId = SimProxy.resolveEngineId(url, 0);
                        SimProxy proxy = new SimProxy(p, d, url, lwEngineId);
                        try {
                            for (int i = 0; i < WARMUP; i++) {
                                exchange(proxy, tokens); // connections, JIT
                            }
                        } catch (IllegalStateException e) {
                            System.out.println("  (first exchange with a new layer-wise P got no answer; new P)");
                            continue;
                        }
                        jit.settle(() -> {
                            prefillAloneOf(p, tokens);
                            transferAlone(p, d, lwEngineId, url, tokens);
                            exchangeWithEvidence(proxy, p, d, tokens, new ArrayList<>(), new ArrayList<>());
                        });
                        jit.measureStart();
                        List<Double> l = new ArrayList<>();
                        List<Double> lp = new ArrayList<>();
                        List<Double> lt = new ArrayList<>();
                        List<Evidence> ev = new ArrayList<>();
                        for (int r = 0; r < reps; r++) {
                            // P's prefill alone and the transfer alone on this same P, interleaved with the exchanges
                            Evidence own = prefillAloneOf(p, tokens);
                            aloneEv.add(own);
                            double ownXfer = transferAlone(p, d, lwEngineId, url, tokens).wallMs();
                            List<SimProxy.Exchange> one = new ArrayList<>();
                            ev.add(exchangeWithEvidence(proxy, p, d, tokens, one, lwWin));
                            SimProxy.Exchange e = one.get(0);
                            l.add(ms(e.decode().kvReadyNanos() - e.prefill().arrivalNanos()));
                            paired.add(new double[] {l.getLast(), own.wallMs(), ownXfer});
                            lp.add(ms(e.prefill().kvReadyNanos() - e.prefill().arrivalNanos()));
                            lt.add(ms(e.decode().kvReadyNanos() - e.prefill().kvReadyNanos()));
                        }
                        jit.measureStop();
                        nice = niceLine(); // while D lives
                        lw = median(l);
                        lwPrefill = median(lp);
                        lwTail = median(lt);
                        lwEv.addAll(ev);
                    }
                }
            }
        }
        double max = Math.max(prefill, xfer);
        System.out.printf(Locale.ROOT, "%-6s %7d %9.1f %9.1f %11d %9.1f %9.1f %9.1f %10.1f %9.2f %9.2f %11.1f %10.1f %8.1f%n",
                kind, tokens, fill, xfer, perLayer1k / 1000, prefill, whole, lw, max, whole / max, lw / max, lwPrefill,
                lwTail, jit.measuredMs());
        long kvBytes = (long) ((tokens + MODEL.blockSize() - 1) / MODEL.blockSize()) * MODEL.pageBytes(1) * MODEL.numLayers();
        System.out.println("  " + String.format(Locale.ROOT, "xfer alone: %.1f MiB of KV in %.1f ms = %.2f GB/s (%.2f Gbit/s) "
                + "on link %s", kvBytes / 1048576.0, xfer, kvBytes / (xfer * 1e6), kvBytes * 8 / (xfer * 1e6), LINK));
        if (!aloneEv.isEmpty()) {
            // the row's max uses the whole-request P's prefill; the layer-wise P is another engine
            // instance (its own KV memory), whose prefill alone is measured interleaved with its exchanges
            double own = Evidence.medians(aloneEv).wallMs();
            System.out.println("  " + String.format(Locale.ROOT, "same-P reference: the layer-wise P's own prefill alone "
                    + "(interleaved with its exchanges) %.1f ms, whole-request P's %.1f ms; lw / max(own prefill, xfer) "
                    + "%.2f", own, prefill, lw / Math.max(own, xfer)));
        }
        if (!paired.isEmpty()) {
            // each exchange against references of the same P taken just before it: the host's memory speed
            // drifts (the fill alone varied 1.3-2x between rounds on an idle guest), and that cancels here
            List<Double> ratios = paired.stream().map(v -> v[0] / Math.max(v[1], v[2])).toList();
            StringBuilder each = new StringBuilder();
            for (double[] v : paired) {
                each.append(String.format(Locale.ROOT, "%s%.1f/%.1f/%.1f", each.isEmpty() ? "" : ", ", v[0], v[1], v[2]));
            }
            System.out.println("  " + String.format(Locale.ROOT, "paired: median over the lw exchanges of lw / max(the "
                    + "same P's prefill alone, its transfer alone), both taken just before it, %.2f (lw/prefill/xfer ms: %s)",
                    median(ratios), each));
        }
        System.out.println("  " + jit.describe(xferWin, aloneEv, lwWin));
        System.out.println("  " + nice);
        if (!aloneEv.isEmpty() && !lwEv.isEmpty()) {
            System.out.println("  P's prefill, medians, ms (step thread: on-CPU, runnable waiting for a core, parked; its "
                    + "forward passes: KV fill, parked for the device, saveKvLayer+waitForSave; other threads' on-CPU "
                    + "over the same window):");
            System.out.println("    alone: " + Evidence.medians(aloneEv).describe());
            System.out.println("    lw:    " + Evidence.medians(lwEv).describe());
            System.out.println("    lw exchange, P arrival -> D KV ready, " + String.format(Locale.ROOT, "%.1f ms",
                    median(lwWin.stream().map(Window::wallMs).toList())) + "; every thread group's on-CPU ms/run-queue ms/times run: "
                    + Window.describe(lwWin));
            System.out.println("    xfer alone, D arrival -> D KV ready, " + String.format(Locale.ROOT, "%.1f ms", xfer)
                    + "; on-CPU ms/run-queue ms/times run: " + Window.describe(xferWin));
            Evidence alone = Evidence.medians(aloneEv);
            int chunks = (tokens + limits.maxNumBatchedTokens() - 1) / limits.maxNumBatchedTokens();
            System.out.println("    " + floor(max, lw, prefill, alone.jvmCpuMs() - alone.gcJitCpuMs(), alone.stepCpuMs(), xfer,
                    median(xferWin.stream().map(w -> w.cpuMs() - w.jitMs()).toList()),
                    median(lwWin.stream().map(w -> w.cpuMs() - w.jitMs()).toList()), chunks * MODEL.numLayers())
                    + String.format(Locale.ROOT, " (JIT compiler threads left out: %.1f ms in the lw exchange)",
                    median(lwWin.stream().map(Window::jitMs).toList())));
            System.out.println("    " + memoryTerm(max, lw, alone, Evidence.medians(lwEv), xfer, chunks * MODEL.numLayers()));
            System.out.println("    load average " + load0 + " -> " + loadAverage() + ", " + CORES + " cores");
        }
    }

    private static final int CORES = Runtime.getRuntime().availableProcessors();
    /** What the P-D traffic ran over ({@code -Dttft.link}; {@code scripts/ttft-link.sh} sets the tbf rate). */
    private static final String LINK = System.getProperty("ttft.link", "loopback, no rate limit");
    /** Thread-counter snapshots taken before the first cell, so that the JIT has compiled the instrument. */
    private static final int SNAPSHOT_WARMUP = Integer.getInteger("ttft.snapshotWarmup", 400);
    /** Exchanges before each P's measured ones (connections, and the JIT out of the measured windows). */
    private static final int WARMUP = Integer.getInteger("ttft.warmup", 5);
    /** Whether each P warms up further until the JIT settled ({@code -Dttft.jitSettle}, default true). */
    private static final boolean JIT_SETTLE = Boolean.parseBoolean(System.getProperty("ttft.jitSettle", "true"));
    /** The most pairs of settling rounds per P and phase ({@code -Dttft.jitSettleMax}). */
    private static final int SETTLE_MAX = Integer.getInteger("ttft.jitSettleMax", 40);
    /** The most seconds of settling rounds per P and phase ({@code -Dttft.jitSettleSeconds}). */
    private static final int SETTLE_SECONDS = Integer.getInteger("ttft.jitSettleSeconds", 30);
    /** Settled: the compiler threads were on a CPU for at most this share of two rounds' wall time. */
    private static final double SETTLE_PERCENT = 1.0;
    /** The nice value of every thread D starts ({@code -Dttft.dNice}, 0..19, default 0). */
    private static final int D_NICE = Integer.getInteger("ttft.dNice", 0);

    /** One round of a cell's code, run to warm it up. */
    @FunctionalInterface
    private interface Round {
        void run() throws Exception;
    }

    /**
     * The JIT compilers' CPU over one cell: how many settling rounds each P needed and the share of
     * the last pair's wall time the compiler threads were on a CPU, and their CPU over the measured
     * runs (between {@link #measureStart} and {@link #measureStop}, all phases of the cell).
     */
    private static final class JitAccount {
        private final List<String> settles = new ArrayList<>();
        private long measuredNanos;
        private long measuredWallNanos;
        private long c0;
        private long t0;

        /**
         * Runs pairs of {@code round} until the compiler threads were on a CPU for at most {@link
         * #SETTLE_PERCENT} of a pair's wall time, at most {@link #SETTLE_MAX} pairs or {@link
         * #SETTLE_SECONDS} (on 2 shared cores the
         * compile queue lags a fixed warm-up: a method that reached its threshold in the last warm-up
         * rounds is compiled inside the first measured ones).
         */
        void settle(Round round) throws Exception {
            if (!JIT_SETTLE) {
                return;
            }
            int pairs = 0;
            double percent = Double.NaN;
            long end = System.nanoTime() + SETTLE_SECONDS * 1_000_000_000L;
            while (pairs < SETTLE_MAX && System.nanoTime() - end < 0) {
                long c = ThreadTimes.jitCpuNanos();
                long t = System.nanoTime();
                round.run();
                round.run();
                pairs++;
                percent = 100.0 * (ThreadTimes.jitCpuNanos() - c) / (System.nanoTime() - t);
                if (percent <= SETTLE_PERCENT) {
                    break;
                }
            }
            settles.add(String.format(Locale.ROOT, "%d%s (%.1f %%)", 2 * pairs, percent > SETTLE_PERCENT ? ", cap" : "",
                    percent));
        }

        void measureStart() {
            c0 = ThreadTimes.jitCpuNanos();
            t0 = System.nanoTime();
        }

        void measureStop() {
            measuredNanos += ThreadTimes.jitCpuNanos() - c0;
            measuredWallNanos += System.nanoTime() - t0;
        }

        double measuredMs() {
            return ms(measuredNanos);
        }

        String describe(List<Window> xfer, List<Evidence> alone, List<Window> lw) {
            return String.format(Locale.ROOT, "JIT compiler threads on a CPU while measured: %.1f ms in %.1f s (%.2f %%); "
                    + "median ms inside the windows: xfer alone %.1f, prefill alone %.1f, lw exchange %.1f (max %.1f); "
                    + "settling rounds (JIT share of the last two): %s", ms(measuredNanos), measuredWallNanos / 1e9,
                    measuredWallNanos == 0 ? 0 : 100.0 * measuredNanos / measuredWallNanos,
                    median(xfer.stream().map(Window::jitMs).toList()), median(alone.stream().map(Evidence::jitCpuMs).toList()),
                    median(lw.stream().map(Window::jitMs).toList()),
                    lw.stream().mapToDouble(Window::jitMs).max().orElse(Double.NaN),
                    settles.isEmpty() ? "none (-Dttft.jitSettle=false)" : String.join(", ", settles));
        }
    }

    /**
     * D's engine; with {@link #D_NICE} started on a thread of its own at that nice value, so that
     * every thread D starts inherits it (Linux: a per-thread attribute a new thread takes from the
     * one that starts it): D's step loop, its connector worker's side-channel, receiver and bootstrap
     * threads, its transfer engine's threads and the TCP target sessions its acceptor starts later
     * for P's lanes. The closest this 2-core machine comes to D on its own host: D's threads take
     * only the cores P's threads leave. Not the same as separate hosts: D's threads still wait for a
     * core behind P's, and P's wait for none of D's only while P has a runnable thread per core.
     */
    private static SimEngine startD(MooncakeConnectorConfig dCfg, int blocks, SimEngine.Limits limits, String kind)
            throws Exception {
        if (D_NICE == 0) {
            return SimEngine.start(dCfg, MODEL, blocks, limits, workers(kind));
        }
        CompletableFuture<SimEngine> d = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().name("mooncake-bench-dstart-0").start(() -> {
            try {
                check(ThreadTuning.setNice(D_NICE), "setpriority refused nice " + D_NICE + " for D's threads");
                d.complete(SimEngine.start(dCfg, MODEL, blocks, limits, workers(kind)));
            } catch (Throwable e) {
                d.completeExceptionally(e);
            }
        });
        t.join();
        return d.get();
    }

    /**
     * Starts the virtual-thread scheduler's carriers from this (nice 0) thread before D is started:
     * a carrier that a niced D thread's first virtual thread started would inherit D's nice value.
     */
    private static void startCarriers() throws InterruptedException {
        int n = Runtime.getRuntime().availableProcessors();
        java.util.concurrent.CountDownLatch all = new java.util.concurrent.CountDownLatch(n);
        List<Thread> vs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            vs.add(Thread.ofVirtual().start(() -> {
                all.countDown();
                long end = System.nanoTime() + 1_000_000_000L;
                while (all.getCount() > 0 && System.nanoTime() < end) {
                    Thread.onSpinWait(); // holds its carrier, so that the next one needs another
                }
            }));
        }
        for (Thread v : vs) {
            v.join();
        }
    }

    /** The threads whose nice value is not 0 now, by value and kernel name (what -Dttft.nice / -Dttft.dNice reached). */
    private static String niceLine() {
        Map<Integer, Map<String, Integer>> n = ThreadTimes.nonZeroNice();
        if (n.isEmpty()) {
            return "threads at a nice value other than 0: none";
        }
        StringBuilder b = new StringBuilder("threads at a nice value other than 0, kernel name x count:");
        n.forEach((nice, names) -> {
            b.append(" nice ").append(nice).append(':');
            names.forEach((name, count) -> b.append(' ').append(name).append(" x").append(count));
            b.append(';');
        });
        return b.toString();
    }

    /** Thread counters taken on D's step thread when a named request's KV load ends (before D verifies it). */
    private static final Map<String, CompletableFuture<ThreadTimes>> D_LOADED =
            new java.util.concurrent.ConcurrentHashMap<>();

    private static void snapshotOnKvLoaded(String dReqId) {
        CompletableFuture<ThreadTimes> f = D_LOADED.remove(dReqId);
        if (f != null) {
            f.complete(ThreadTimes.snapshot());
        }
    }

    private static CompletableFuture<ThreadTimes> atKvLoaded(String dReqId) {
        CompletableFuture<ThreadTimes> f = new CompletableFuture<>();
        D_LOADED.put(dReqId, f);
        return f;
    }

    /**
     * Every thread group's on-CPU time and run-queue wait over one window ({@code wallMs}): a whole
     * layer-wise exchange (P arrival → D KV ready) or a transfer alone (D arrival → D KV ready).
     */
    record Window(double wallMs, Map<String, ThreadTimes.Counters> groups) {

        double cpuMs() {
            return ms(ThreadTimes.sum(groups, "").cpuNanos());
        }

        /** On-CPU ms of the JIT's compiler threads (a warm-up cost, left out of the floors). */
        double jitMs() {
            return ms(ThreadTimes.sum(groups, "C1 ").cpuNanos() + ThreadTimes.sum(groups, "C2 ").cpuNanos());
        }

        double runqMs() {
            return ms(ThreadTimes.sum(groups, "").waitNanos());
        }

        /**
         * Per group, medians over {@code ws} of on-CPU ms, run-queue ms and times it was run on a
         * core (the kernel's timeslices: wake-ups plus preemptions), largest CPU first.
         */
        static Map<String, double[]> medianByGroup(List<Window> ws) {
            java.util.Set<String> names = new java.util.TreeSet<>();
            ws.forEach(w -> names.addAll(w.groups().keySet()));
            Map<String, double[]> out = new java.util.LinkedHashMap<>();
            names.stream().map(n -> Map.entry(n, new double[] {
                    median(ws.stream().map(w -> ms(cpuOf(w, n))).toList()),
                    median(ws.stream().map(w -> ms(runqOf(w, n))).toList()),
                    median(ws.stream().map(w -> (double) slicesOf(w, n)).toList())}))
                    .sorted((a, b) -> Double.compare(b.getValue()[0], a.getValue()[0]))
                    .forEach(e -> out.put(e.getKey(), e.getValue()));
            return out;
        }

        private static long cpuOf(Window w, String n) {
            ThreadTimes.Counters c = w.groups().get(n);
            return c == null ? 0 : c.cpuNanos();
        }

        private static long slicesOf(Window w, String n) {
            ThreadTimes.Counters c = w.groups().get(n);
            return c == null ? 0 : c.slices();
        }

        private static long runqOf(Window w, String n) {
            ThreadTimes.Counters c = w.groups().get(n);
            return c == null ? 0 : c.waitNanos();
        }

        static String describe(List<Window> ws) {
            StringBuilder b = new StringBuilder();
            for (Map.Entry<String, double[]> e : medianByGroup(ws).entrySet()) {
                double[] v = e.getValue();
                if (v[0] >= 0.5 || v[1] >= 0.5) {
                    b.append(String.format(Locale.ROOT, "%s%s %.1f/%.1f/%d", b.isEmpty() ? "" : ", ", e.getKey(), v[0],
                            v[1], (long) v[2]));
                }
            }
            return b.toString();
        }
    }

    /**
     * The floor of one cell on this machine, two ways, as ms and against {@code max(prefill,
     * transfer)}. CPU sum: the exchange cannot end before its threads' CPU time, spread over every
     * core, has run: from the references (P's prefill alone + the transfer alone, i.e. P's send and
     * D's receive) and from the layer-wise exchanges' own threads. Co-location: P's step thread
     * shares the cores with the transfer's busy threads (alone it kept {@code xferCpu / xfer}
     * cores busy: P's copy or sending lanes and, here in the same host, D's receiving sessions);
     * with fair scheduling it gets {@code cores / (1 + that)} of a core while it fills, so the fill
     * stretches by the inverse and the prefill with it, and D's KV is ready one saved layer after.
     * A miss above the co-location floor is not the machine's sharing; one below 1.15 x max of
     * the floor is. Pipeline: with a rate-limited link ({@code scripts/ttft-link.sh}) the transfer
     * alone keeps fewer cores busy (the co-location term shrinks towards {@code pref + xfer /
     * saves}) and the bound is the link: busy from P's first saved layer, it ends one layer's
     * transfer after {@code max} at best.
     */
    static String floor(double max, double lw, double pref, double prefCpu, double stepCpu, double xfer,
            double xferCpu, double lwCpu, int saves) {
        double refs = (prefCpu + xferCpu) / CORES;
        double exch = lwCpu / CORES;
        double busy = xferCpu / xfer; // cores the transfer alone kept busy
        double share = Math.min(1, CORES / (1 + busy));
        double coloc = pref + stepCpu * (1 / share - 1) + xfer / saves;
        double link = max + xfer / saves; // link-bound: the link busy from the first saved layer on, one layer after max
        String verdict = Math.max(refs, coloc) > 1.15 * max ? "the machine: "
                + (refs > 1.15 * max ? "the CPU to run" : "sharing " + CORES + " cores with the transfer's threads")
                + " needs more than 1.15 x max"
                : lw <= 1.15 * max ? "met" : "not the machine: the floors are within 1.15 x max";
        return String.format(Locale.ROOT, "floors on %d cores: cpu sum refs (prefill %.1f + xfer %.1f cpu ms) / %d = %.1f "
                + "ms = %.2f x max, lw exchange's cpu %.1f / %d = %.1f ms = %.2f x max; co-location (xfer alone busy %.2f "
                + "cores, step gets %.2f of a core, its %.1f cpu ms stretch) %.1f ms = %.2f x max; pipeline (max + one "
                + "saved layer's transfer, xfer / %d: the floor when the link, not the CPU, bounds the transfer) %.1f ms "
                + "= %.2f x max; lw / max %.2f -> %s",
                CORES, prefCpu, xferCpu, CORES, refs, refs / max, lwCpu, CORES, exch, exch / max, busy, share, stepCpu,
                coloc, coloc / max, saves, link, link / max, lw / max, verdict);
    }

    /**
     * What the step thread's own CPU says: the layer-wise prefill's stores are the same as alone
     * (same tokens, same layers), so step CPU beyond the prefill alone's, less the hooks' time, is
     * the fill running slower beside the transfer's threads, not waiting for a core (run-queue and
     * parked time are not CPU). On one host that is the memory both share; {@code FillContention
     * .. model} shows the same stores slowing beside a plain memcpy. Measured in the exchange
     * itself, so it explains a miss rather than predicting it: prefill alone (the layer-wise P's
     * own) + that extra CPU + one saved layer's transfer.
     */
    static String memoryTerm(double max, double lw, Evidence alone, Evidence lwp, double xfer, int saves) {
        double extra = Math.max(0, (lwp.stepCpuMs() - lwp.hookMs()) - (alone.stepCpuMs() - alone.hookMs()));
        double term = alone.wallMs() + extra + xfer / saves;
        double own = Math.max(alone.wallMs(), xfer);
        String verdict = lw <= 1.15 * max ? "met"
                : term > 1.15 * max ? "the fill's own CPU beside the transfer accounts for the miss"
                : "the fill's own CPU does not account for the miss";
        return String.format(Locale.ROOT, "memory: the step thread's CPU less its hooks, lw prefill %.1f against %.1f "
                + "alone for the same stores (+%.1f ms, %.0f %%); own prefill alone %.1f + that + xfer / %d = %.1f ms = "
                + "%.2f x max (%.2f x max(own prefill, xfer)) -> %s",
                lwp.stepCpuMs() - lwp.hookMs(), alone.stepCpuMs() - alone.hookMs(), extra,
                100 * extra / Math.max(1e-9, alone.stepCpuMs() - alone.hookMs()), alone.wallMs(), saves, term, term / max,
                term / own, verdict);
    }

    private static String loadAverage() {
        try {
            String[] f = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).split(" ");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (java.io.IOException e) {
            return "?";
        }
    }

    /**
     * Where the time of one measured prefill went, ms, over the window from its submission to its KV
     * being ready at P (its first token): P's step thread (wall; on-CPU, runnable but waiting for a
     * core, and the rest: parked or blocked, from the kernel; its forward passes' KV fill, waits for
     * the simulated device and connector hooks, from {@link SimEngine#forwardTimes()}), and the
     * on-CPU time of the other thread groups of this JVM.
     */
    record Evidence(double wallMs, double fwdMs, double fillMs, double devMs, double hookMs, double stepCpuMs,
            double stepRunqMs, double stepPreempted, double xferCpuMs, double senderCpuMs, double tcpCpuMs, double tcpDCpuMs,
            double dCpuMs, double gcJitCpuMs, double jitCpuMs, double jvmCpuMs, double jvmRunqMs) {

        static Evidence of(long wallNanos, long[] f0, long[] f1, Map<String, ThreadTimes.Counters> t) {
            ThreadTimes.Counters step = ThreadTimes.sum(t, "mooncake-p-engi");
            ThreadTimes.Counters all = ThreadTimes.sum(t, "");
            double gcJit = 0;
            for (Map.Entry<String, ThreadTimes.Counters> e : t.entrySet()) {
                String n = e.getKey();
                if (n.startsWith("GC ") || n.startsWith("G1 ") || n.startsWith("C1 ") || n.startsWith("C2 ")
                        || n.startsWith("VM ")) {
                    gcJit += ms(e.getValue().cpuNanos());
                }
            }
            return new Evidence(ms(wallNanos), ms(f1[0] - f0[0]), ms(f1[1] - f0[1]), ms(f1[2] - f0[2]),
                    ms(f1[3] - f0[3]), ms(step.cpuNanos()), ms(step.waitNanos()), step.involuntary(),
                    ms(ThreadTimes.sum(t, "mooncake-p-xfer").cpuNanos()),
                    ms(ThreadTimes.sum(t, "mooncake-p-send").cpuNanos()),
                    ms(ThreadTimes.sum(t, "mooncake-initia").cpuNanos()),
                    ms(ThreadTimes.sum(t, "mooncake-target").cpuNanos()),
                    ms(ThreadTimes.sum(t, "mooncake-d-").cpuNanos()), gcJit,
                    ms(ThreadTimes.sum(t, "C1 ").cpuNanos() + ThreadTimes.sum(t, "C2 ").cpuNanos()), ms(all.cpuNanos()),
                    ms(all.waitNanos()));
        }

        static Evidence medians(List<Evidence> xs) {
            java.util.function.Function<java.util.function.ToDoubleFunction<Evidence>, Double> m = f -> median(
                    xs.stream().map(e -> f.applyAsDouble(e)).toList());
            return new Evidence(m.apply(Evidence::wallMs), m.apply(Evidence::fwdMs), m.apply(Evidence::fillMs),
                    m.apply(Evidence::devMs), m.apply(Evidence::hookMs), m.apply(Evidence::stepCpuMs),
                    m.apply(Evidence::stepRunqMs), m.apply(Evidence::stepPreempted), m.apply(Evidence::xferCpuMs),
                    m.apply(Evidence::senderCpuMs), m.apply(Evidence::tcpCpuMs), m.apply(Evidence::tcpDCpuMs), m.apply(Evidence::dCpuMs),
                    m.apply(Evidence::gcJitCpuMs), m.apply(Evidence::jitCpuMs), m.apply(Evidence::jvmCpuMs),
                    m.apply(Evidence::jvmRunqMs));
        }

        String describe() {
            return String.format(Locale.ROOT, "pref %.1f = step cpu %.1f + runq %.1f + parked %.1f (preempted %d) | "
                    + "fwd %.1f: fill %.1f, dev %.1f, hooks %.2f | others' cpu: xfer %.1f, sender %.1f, tcp P %.1f, tcp D %.1f, "
                    + "D %.1f, gc+jit %.1f; JVM cpu %.1f (%.2f cores), runq %.1f | pref - runq %.1f", wallMs, stepCpuMs,
                    stepRunqMs, Math.max(0, wallMs - stepCpuMs - stepRunqMs), (long) stepPreempted, fwdMs, fillMs,
                    devMs, hookMs, xferCpuMs, senderCpuMs, tcpCpuMs, tcpDCpuMs, dCpuMs, gcJitCpuMs, jvmCpuMs, jvmCpuMs / wallMs,
                    jvmRunqMs, wallMs - stepRunqMs);
        }
    }

    /**
     * Workers with a short receive margin at D (5 s): a warm-up exchange whose first pull is lost fails
     * quickly and is retried instead of waiting out the default margin.
     */
    private static SimEngine.WorkerFactory workers(String kind) {
        return ConnectorSimWorker.factory(c -> io.mooncake4j.engine.TransferEngines.create(kind),
                b -> b.receiveTimeoutMargin(Duration.ofSeconds(5)));
    }

    private static void warmUp(SimProxy proxy, int tokens) throws Exception {
        try {
            exchange(proxy, tokens);
        } catch (IllegalStateException e) {
            System.out.println("  (warm-up exchange failed, retried: " + e.getMessage().substring(0, 60) + "...)");
            exchange(proxy, tokens);
        }
    }

    /** P's prefill of a plain request (no transfer): arrival → KV ready, ms. */
    private static double prefillAlone(SimEngine p, int tokens) throws Exception {
        return prefillAloneOf(p, tokens).wallMs();
    }

    /** P's prefill of a plain request (no transfer), with where its time went. */
    private static Evidence prefillAloneOf(SimEngine p, int tokens) throws Exception {
        int[] prompt = prompt(tokens);
        long[] f0 = p.forwardTimes();
        ThreadTimes t0 = ThreadTimes.snapshot();
        CompletableFuture<ThreadTimes> atToken = new CompletableFuture<>();
        SimResult r = p.submit(SimProxy.newTransferId(), prompt, 1, null, t -> atToken.complete(ThreadTimes.snapshot()))
                .get(5, TimeUnit.MINUTES);
        long[] f1 = p.forwardTimes();
        check(r.ok(), "prefill alone failed: " + r);
        if (Boolean.getBoolean("ttft.verbose")) {
            System.out.printf(Locale.ROOT, "  prefill alone: %.1f ms at %s%n", ms(r.kvReadyNanos() - r.arrivalNanos()),
                    epochSpan(r));
        }
        return Evidence.of(r.kvReadyNanos() - r.arrivalNanos(), f0, f1, atToken.get().since(t0));
    }

    /**
     * P and D requests sent together as {@link SimProxy#submit} does, with where P's prefill time
     * went: the thread counters are taken at the submission and when P's first token is sampled
     * (on P's step thread, right after its KV is ready).
     */
    private static Evidence exchangeWithEvidence(SimProxy proxy, SimEngine p, SimEngine d, int tokens,
            List<SimProxy.Exchange> out, List<Window> windows) throws Exception {
        String transferId = SimProxy.newTransferId();
        int[] prompt = prompt(tokens);
        long[] f0 = p.forwardTimes();
        CompletableFuture<ThreadTimes> loaded = atKvLoaded(transferId + "-d");
        ThreadTimes t0 = ThreadTimes.snapshot();
        CompletableFuture<ThreadTimes> atToken = new CompletableFuture<>();
        CompletableFuture<SimResult> pf = p.submit(transferId + "-p", prompt, 1, SimProxy.prefillParams(transferId),
                t -> atToken.complete(ThreadTimes.snapshot()));
        CompletableFuture<SimResult> df = d.submit(transferId + "-d", prompt, 1,
                SimProxy.decodeParams(transferId, proxy.remoteEngineId(), proxy.bootstrapUrl()));
        SimProxy.Exchange e = new SimProxy.Exchange(transferId, pf.get(5, TimeUnit.MINUTES), df.get(5, TimeUnit.MINUTES));
        long[] f1 = p.forwardTimes();
        check(e.ok(), "exchange failed: " + e);
        verbose(e);
        out.add(e);
        windows.add(new Window(ms(e.decode().kvReadyNanos() - e.prefill().arrivalNanos()), loaded.get().since(t0)));
        return Evidence.of(e.prefill().kvReadyNanos() - e.prefill().arrivalNanos(), f0, f1, atToken.get().since(t0));
    }

    /** D's load of a request P has prefilled already: D arrival → D KV ready, with every thread's CPU over it. */
    private static Window transferAlone(SimEngine p, SimEngine d, String engineId, String url, int tokens)
            throws Exception {
        String tid = SimProxy.newTransferId();
        int[] prompt = prompt(tokens);
        var pf = p.submit(tid + "-p", prompt, 1, SimProxy.prefillParams(tid));
        SimResult pr = pf.get(5, TimeUnit.MINUTES);
        CompletableFuture<ThreadTimes> loaded = atKvLoaded(tid + "-d");
        ThreadTimes t0 = ThreadTimes.snapshot();
        SimResult dr = d.submit(tid + "-d", prompt, 1, SimProxy.decodeParams(tid, engineId, url))
                .get(5, TimeUnit.MINUTES);
        check(pr.ok() && dr.ok(), "transfer alone failed: " + dr);
        return new Window(ms(dr.kvReadyNanos() - dr.arrivalNanos()), loaded.get().since(t0));
    }

    /** P and D requests sent together: P arrival → D KV ready, ms. */
    private static double exchange(SimProxy proxy, int tokens) throws Exception {
        SimProxy.Exchange e = exchangeOf(proxy, tokens);
        return ms(e.decode().kvReadyNanos() - e.prefill().arrivalNanos());
    }

    /** P and D requests sent together, checked (and printed with {@code -Dttft.verbose=true}). */
    private static SimProxy.Exchange exchangeOf(SimProxy proxy, int tokens) throws Exception {
        SimProxy.Exchange e = proxy.submit(SimProxy.newTransferId(), prompt(tokens), 1).get(5, TimeUnit.MINUTES);
        check(e.ok(), "exchange failed: " + e);
        verbose(e);
        return e;
    }

    private static void verbose(SimProxy.Exchange e) {
        if (Boolean.getBoolean("ttft.verbose")) {
            System.out.printf(Locale.ROOT, "  exchange: P prefill %.1f ms, P ready -> D ready %.1f ms, D arrival - P "
                    + "arrival %.1f ms; P prefill at %s%n", ms(e.prefill().kvReadyNanos() - e.prefill().arrivalNanos()),
                    ms(e.decode().kvReadyNanos() - e.prefill().kvReadyNanos()),
                    ms(e.decode().arrivalNanos() - e.prefill().arrivalNanos()), epochSpan(e.prefill()));
        }
    }

    /**
     * A result's arrival → KV ready as wall-clock epoch microseconds, {@code from..to}: to line a window
     * up with a JFR recording's or a unified log's timestamps ({@code -Dttft.verbose=true}).
     */
    private static String epochSpan(SimResult r) {
        java.time.Instant now = java.time.Instant.now();
        long nanoNow = System.nanoTime();
        long nowUs = now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
        return (nowUs - (nanoNow - r.arrivalNanos()) / 1000) + ".." + (nowUs - (nanoNow - r.kvReadyNanos()) / 1000);
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }
}
