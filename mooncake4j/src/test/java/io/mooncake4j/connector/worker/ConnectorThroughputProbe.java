package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.addPull;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.ModelPreset;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * Connector throughput against the raw engine: P → D over the real side channel, each round all
 * {@code blocks} Llama-3-8B blocks (2 MiB each over its 32 layers) as requests of
 * {@code blocksPerRequest} blocks in one pull, reversed on D so that every block and layer is its
 * own descriptor. Rounds are interleaved with the raw engine: after each connector round the very
 * descriptor lists a connector round wrote are replayed straight on the same engine
 * ({@code batchTransferSyncWrite} to the same D segment), right after it or, every other round,
 * right before the next one (ABBA order), so both see the same machine state; both are warmed up first
 * ({@code -Dprobe.warmup}, default 10 rounds). A connector round runs from D's {@code startLoadKv}
 * to the {@code getTransferResults} that names its last request; D is asked after each signal of a
 * finished load ({@code pollMicros} 0, the default) or every {@code pollMicros}. With
 * {@code -Dmooncake4j.waveTrace=true} it prints the median per-wave breakdown ({@link WaveTrace}); with
 * {@code -Dprobe.threadCpu=true} each thread's CPU time and run-queue wait per connector round (Linux);
 * with {@code -Dprobe.writeCpu=true} the same over each engine write only, the connector's beside the
 * raw replay's (both timed around the engine call by the same code; the replay's calls go through the
 * same recording proxy); with {@code -Dprobe.replayThread=true} the replay runs on a platform thread
 * of its own while the probe's thread parks, as the connector's transfer thread writes while the
 * embedder waits. After the fixed warm-up more full rounds run until the JIT compiler threads are
 * (nearly) idle ({@code -Dprobe.jitSettle=false}: not). Besides the sums it prints the median of the
 * per-round ratios and of the per-round differences (connector round − raw write, and connector's
 * engine write − raw write) with a distribution-free 95 % interval, the quartiles and the medians of
 * the rounds where either went first: the interval says what a run of that many rounds can resolve.
 * Engine {@code mock} (in-JVM byte copies) or {@code tcp} (the real TCP engine on loopback). Not a
 * test (no assertions); run:
 *
 * <pre>
 * mvn -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.connector.worker.ConnectorThroughputProbe [rounds] [mock|tcp] [blocks] [blocksPerRequest] [pollMicros]
 * </pre>
 */
public final class ConnectorThroughputProbe {

    private ConnectorThroughputProbe() {
    }

    /** One recorded {@code batchTransferSyncWrite}. */
    private record Write(String target, long[] src, long[] dst, long[] len) {}

    /** Per-thread CPU and run-queue wait over each engine write ({@code -Dprobe.writeCpu=true}). */
    private static final boolean WRITE_CPU = Boolean.getBoolean("probe.writeCpu");

    /**
     * The connector's engine writes as the probe times them: nanoseconds of each call (the same clock
     * around the same call as {@link #replay}), and with {@link #WRITE_CPU} each thread's figures over it.
     */
    private static final List<Long> connWriteNanos = Collections.synchronizedList(new ArrayList<>());
    private static final Map<String, long[]> connWriteCpu = new java.util.concurrent.ConcurrentHashMap<>();
    /** Set on the thread of {@link #replay}: its calls go through the same proxy but are not the connector's. */
    /** D's finished listener, which the rounds wait on unless they poll. */
    private static FinishSignal dFinished;
    private static final ThreadLocal<Boolean> REPLAYING = ThreadLocal.withInitial(() -> false);

    /** Wraps an engine so that every {@code batchTransferSyncWrite} of the connector is recorded. */
    private static TransferEngine recording(TransferEngine delegate, List<Write> writes) {
        return (TransferEngine) Proxy.newProxyInstance(TransferEngine.class.getClassLoader(),
                new Class<?>[] {TransferEngine.class}, (proxy, method, a) -> {
                    boolean write = method.getName().equals("batchTransferSyncWrite");
                    boolean connectors = write && !REPLAYING.get();
                    if (write) { // the replay's own calls too, so that both pay for this copy alike
                        writes.add(new Write((String) a[0], ((long[]) a[1]).clone(), ((long[]) a[2]).clone(),
                                ((long[]) a[3]).clone()));
                    }
                    Map<String, long[]> before = connectors && WRITE_CPU ? ThreadSchedStats.snapshot() : null;
                    long t0 = System.nanoTime();
                    try {
                        return method.invoke(delegate, a);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    } finally {
                        if (connectors) {
                            connWriteNanos.add(System.nanoTime() - t0);
                            if (before != null) {
                                synchronized (connWriteCpu) {
                                    ThreadSchedStats.addByName(connWriteCpu,
                                            ThreadSchedStats.diff(before, ThreadSchedStats.snapshot()));
                                }
                            }
                        }
                    }
                });
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        String kind = args.length > 1 ? args[1] : "mock";
        int blocks = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        int perRequest = args.length > 3 ? Integer.parseInt(args[3]) : 16;
        // how often the probe asks D's getTransferResults, as an embedder's step loop would (µs); 0: it
        // waits for D's signal that a load finished (its finished listener, FinishSignal), then asks
        long pollNanos = (args.length > 4 ? Long.parseLong(args[4]) : 0) * 1_000;
        int warmups = Integer.getInteger("probe.warmup", 10);
        // one-block pulls first, so that the per-wave code is compiled as in a serving process that has
        // served a few thousand requests (a round's own code runs once per round: it would stay interpreted)
        int smallWarmups = Integer.getInteger("probe.smallWarmup", 3000);
        List<Write> writes = Collections.synchronizedList(new ArrayList<>());
        try (PdTestbed bed = new PdTestbed().model(ModelPreset.LLAMA_3_8B, blocks)
                .engines(() -> recording(kind.equals("mock") ? new ScriptedTransferEngine().copyData(true)
                        : TransferEngines.create(kind), writes))
                .abortTimeout(Duration.ofSeconds(60))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            dFinished = FinishSignal.on(d.worker);
            long bytesPerRound = (long) blocks * p.page() * p.model.numLayers();
            int req = 0;
            for (int warm = 0; warm < smallWarmups; warm++) {
                req = round(p, d, req, 1, 1, pollNanos, null);
            }
            for (int warm = 0; warm < warmups; warm++) { // both paths warm (JIT) before anything is timed
                int from = writes.size();
                req = round(p, d, req, blocks, perRequest, pollNanos, null);
                replay(p, writes.subList(from, writes.size()));
            }
            // then more full rounds (3 at a time, at most 30) until the JIT compiler threads were on a CPU for at
            // most 1 % of them: on 2 shared cores the compile queue lags the fixed warm-up, and a compiler thread
            // busy during a connector round but not during its replay (the connector's per-wave code is the one
            // still being compiled) is a difference the connector would not have in a server that ran for a while
            int settle = 0;
            if (Boolean.parseBoolean(System.getProperty("probe.jitSettle", "true")) && JvmActivity.jitCpuNanos() >= 0) {
                for (int batch = 0; batch < 10; batch++) {
                    long c0 = JvmActivity.jitCpuNanos();
                    long t0 = System.nanoTime();
                    for (int k = 0; k < 3; k++) {
                        int from = writes.size();
                        req = round(p, d, req, blocks, perRequest, pollNanos, null);
                        replay(p, writes.subList(from, writes.size()));
                        settle++;
                    }
                    if (JvmActivity.jitCpuNanos() - c0 <= (System.nanoTime() - t0) / 100) {
                        break;
                    }
                }
            }
            long jitAtStart = JvmActivity.jitCpuNanos();
            long[] gcAtStart = JvmActivity.gc();
            long[] conn = new long[rounds];
            long[] raw = new long[rounds];
            long[] connWrite = new long[rounds]; // the connector's engine calls in the round, timed as replay times its own
            long[][] trace = new long[rounds][];
            boolean[] rawWentFirst = new boolean[rounds];
            int calls = 0;
            boolean cpu = Boolean.getBoolean("probe.threadCpu");
            Map<String, long[]> cpuSum = new java.util.HashMap<>(); // per thread over the connector rounds
            Map<String, long[]> rawCpu = new java.util.HashMap<>(); // per thread over the raw writes (probe.writeCpu)
            connWriteCpu.clear();
            if (Boolean.getBoolean("probe.markMeasured")) { // -XX:+PrintCompilation's lines after this one: compiled while measured
                System.out.println("measured rounds start");
            }
            List<Write> previous = null;
            for (int r = 0; r < rounds; r++) {
                // interleaved, in ABBA order (so that neither side always goes first): the raw engine writes
                // the very descriptor lists of a connector round, right after it or right before the next
                boolean rawFirst = r % 2 == 1;
                rawWentFirst[r] = rawFirst;
                if (rawFirst) {
                    raw[r] = replay(p, previous, rawCpu);
                }
                int from = writes.size();
                int fromWrite = connWriteNanos.size();
                long[] t = new long[WaveTrace.Point.values().length + 2];
                Map<String, long[]> before = cpu ? ThreadSchedStats.snapshot() : null;
                req = round(p, d, req, blocks, perRequest, pollNanos, t);
                if (cpu) {
                    ThreadSchedStats.addByName(cpuSum, ThreadSchedStats.diff(before, ThreadSchedStats.snapshot()));
                }
                conn[r] = t[t.length - 1] - t[0];
                trace[r] = t;
                synchronized (connWriteNanos) {
                    for (long w : connWriteNanos.subList(fromWrite, connWriteNanos.size())) {
                        connWrite[r] += w;
                    }
                }
                List<Write> mine = List.copyOf(writes.subList(from, writes.size()));
                calls += mine.size();
                if (!rawFirst) {
                    raw[r] = replay(p, mine, rawCpu);
                }
                previous = mine;
            }
            long jitDuring = JvmActivity.jitCpuNanos() - jitAtStart;
            long[] gcAtEnd = JvmActivity.gc();
            double connS = Arrays.stream(conn).sum() / 1e9;
            double rawS = Arrays.stream(raw).sum() / 1e9;
            double mib = rounds * bytesPerRound / (1024.0 * 1024.0);
            System.out.printf(Locale.ROOT, "engine=%s rounds=%d (after %d one-block and %d warm-up) bytes/round=%d MiB requests/round=%d "
                    + "transfer calls=%d poll=%s%n", kind, rounds, smallWarmups, warmups, bytesPerRound >> 20, blocks / perRequest,
                    calls, pollNanos == 0 ? "D's signal" : pollNanos / 1000 + " us");
            System.out.printf(Locale.ROOT, "then %d more full rounds until the JIT settled; while measured: JIT compiler "
                    + "threads on CPU %.1f ms, %d GC(s) taking %d ms%n", settle, jitDuring / 1e6, gcAtEnd[0] - gcAtStart[0],
                    gcAtEnd[1] - gcAtStart[1]);
            System.out.printf(Locale.ROOT, "connector end-to-end: %.1f MiB/s (%.3f s), round p50 %.3f ms%n", mib / connS,
                    connS, median(conn) / 1e6);
            System.out.printf(Locale.ROOT, "raw engine replay   : %.1f MiB/s (%.3f s), round p50 %.3f ms%n", mib / rawS,
                    rawS, median(raw) / 1e6);
            long[] diff = new long[rounds];
            long[] writeDiff = new long[rounds];
            for (int r = 0; r < rounds; r++) {
                diff[r] = conn[r] - raw[r];
                writeDiff[r] = connWrite[r] - raw[r];
            }
            System.out.printf(Locale.ROOT, "ratio               : %.1f %% (raw/connector time); per round connector - raw: "
                    + "p50 %.3f ms%n", 100 * rawS / connS, median(diff) / 1e6);
            double[] ratios = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                ratios[r] = 100.0 * raw[r] / conn[r];
            }
            double[] sr = ratios.clone();
            Arrays.sort(sr);
            int lo = Math.max(0, (int) Math.floor(rounds / 2.0 - 0.98 * Math.sqrt(rounds)));
            int hi = Math.min(rounds - 1, (int) Math.ceil(rounds / 2.0 + 0.98 * Math.sqrt(rounds)));
            System.out.printf(Locale.ROOT, "per round ratio (raw write / connector round): median %.1f %% (95 %% interval "
                    + "%.1f .. %.1f %%)%n", sr[rounds / 2], sr[lo], sr[hi]);
            printDiffs("connector round - raw write", diff, rawWentFirst);
            printDiffs("connector's engine write - raw write", writeDiff, rawWentFirst);
            if (WaveTrace.ON) {
                long[] outside = new long[rounds];
                long[] slower = new long[rounds];
                int ws = WaveTrace.Point.P_WRITE_START.ordinal() + 1;
                int we = WaveTrace.Point.P_WRITE_END.ordinal() + 1;
                for (int r = 0; r < rounds; r++) {
                    long w = trace[r][we] - trace[r][ws];
                    outside[r] = conn[r] - w;
                    slower[r] = w - raw[r];
                }
                System.out.printf(Locale.ROOT, "per round, p50: connector outside its engine write %.3f ms; its engine "
                        + "write minus the raw replay %.3f ms (valid with one write per round)%n", median(outside) / 1e6,
                        median(slower) / 1e6);
                printBreakdown(trace);
            }
            if (cpu) {
                printThreadCpu(cpuSum, rounds, Arrays.stream(conn).sum() / (double) rounds);
            }
            if (WRITE_CPU) {
                printWriteCpu(connWriteCpu, rawCpu, rounds, Arrays.stream(connWrite).sum() / (double) rounds,
                        rawS * 1e9 / rounds);
            }
            System.out.println("D connections: " + d.worker.diagnostics().dealerConnections() + ", handshake retries: "
                    + d.worker.diagnostics().handshakeRetries() + ", reconnects: "
                    + d.worker.diagnostics().handshakeReconnects());
            System.out.println("stats: " + p.worker.getKvConnectorStats().map(MooncakeKvConnectorStats::reduce));
        }
    }

    /**
     * CPU time and run-queue wait per connector round of each thread that ran at least 0.1 ms per
     * round, most CPU first (from {@link ThreadSchedStats}; the round includes P's bookkeeping after D saw
     * the last request only as far as it ran before D's report).
     */
    private static void printThreadCpu(Map<String, long[]> sum, int rounds, double roundNanos) {
        System.out.printf(Locale.ROOT, "thread CPU per connector round (round mean %.2f ms): ms on CPU (%% of the round), "
                + "ms runnable without a core%n", roundNanos / 1e6);
        sum.entrySet().stream().filter(e -> e.getValue()[0] / rounds >= 100_000)
                .sorted((a, b) -> Long.compare(b.getValue()[0], a.getValue()[0]))
                .forEach(e -> System.out.printf(Locale.ROOT, "  %-28s %8.2f (%5.1f %%) %8.2f%n", e.getKey(),
                        e.getValue()[0] / 1e6 / rounds, 100.0 * e.getValue()[0] / rounds / roundNanos,
                        e.getValue()[1] / 1e6 / rounds));
    }

    private static long replay(PdTestbed.Node p, List<Write> calls) {
        return replay(p, calls, null);
    }

    /**
     * Writes {@code calls} straight on P's engine (on the calling thread, or with
     * {@code -Dprobe.replayThread=true} on a platform thread of its own while the caller parks, as
     * the connector's transfer thread writes while the embedder waits), timed around each engine call
     * as {@link #recording} times the connector's; with {@link #WRITE_CPU} each thread's figures
     * over each call are added to {@code cpu}.
     */
    private static long replay(PdTestbed.Node p, List<Write> calls, Map<String, long[]> cpu) {
        List<Write> copy = List.copyOf(calls);
        if (Boolean.getBoolean("probe.replayThread")) {
            long[] out = new long[1];
            RuntimeException[] failed = new RuntimeException[1];
            Thread t = new Thread(() -> {
                try {
                    out[0] = replayHere(p, copy, cpu);
                } catch (RuntimeException e) {
                    failed[0] = e;
                }
            }, "probe-replay");
            t.start();
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
            if (failed[0] != null) {
                throw failed[0];
            }
            return out[0];
        }
        return replayHere(p, copy, cpu);
    }

    private static long replayHere(PdTestbed.Node p, List<Write> copy, Map<String, long[]> cpu) {
        REPLAYING.set(true);
        try {
            return replayCalls(p, copy, cpu);
        } finally {
            REPLAYING.set(false);
        }
    }

    private static long replayCalls(PdTestbed.Node p, List<Write> copy, Map<String, long[]> cpu) {
        long sum = 0;
        for (Write c : copy) {
            Map<String, long[]> before = cpu != null && WRITE_CPU ? ThreadSchedStats.snapshot() : null;
            long t0 = System.nanoTime();
            int ret = p.transferEngine.batchTransferSyncWrite(c.target(), c.src(), c.dst(), c.len());
            sum += System.nanoTime() - t0;
            if (before != null) {
                ThreadSchedStats.addByName(cpu, ThreadSchedStats.diff(before, ThreadSchedStats.snapshot()));
            }
            if (ret != 0) {
                throw new IllegalStateException("raw replay failed: " + ret);
            }
        }
        return sum;
    }

    /**
     * Per-round differences (connector − raw, paired within a round): median with the quartiles,
     * the share of rounds where the connector was slower, and the medians of the rounds where the
     * connector went first and where the raw write did (an order effect shows as a gap between them).
     */
    private static void printDiffs(String what, long[] diff, boolean[] rawFirst) {
        long[] s = diff.clone();
        Arrays.sort(s);
        int n = s.length;
        long slower = Arrays.stream(diff).filter(x -> x > 0).count();
        long[] cf = java.util.stream.IntStream.range(0, n).filter(r -> !rawFirst[r]).mapToLong(r -> diff[r]).toArray();
        long[] rf = java.util.stream.IntStream.range(0, n).filter(r -> rawFirst[r]).mapToLong(r -> diff[r]).toArray();
        // distribution-free ~95 % interval of the median: the order statistics n/2 -/+ 0.98 sqrt(n) (sign test)
        int lo = Math.max(0, (int) Math.floor(n / 2.0 - 0.98 * Math.sqrt(n)));
        int hi = Math.min(n - 1, (int) Math.ceil(n / 2.0 + 0.98 * Math.sqrt(n)));
        System.out.printf(Locale.ROOT, "per round %s, ms: median %.3f (95 %% interval %.3f .. %.3f; quartiles %.3f .. "
                + "%.3f; n=%d, connector slower in %d); connector first %.3f (n=%d), raw first %.3f (n=%d)%n", what,
                median(diff) / 1e6, s[lo] / 1e6, s[hi] / 1e6, s[n / 4] / 1e6, s[(3 * n) / 4] / 1e6, n, slower,
                median(cf) / 1e6, cf.length, median(rf) / 1e6, rf.length);
    }

    /** Each thread's CPU and run-queue wait per round over the connector's engine writes and over the raw ones. */
    private static void printWriteCpu(Map<String, long[]> conn, Map<String, long[]> raw, int rounds, double connNanos,
            double rawNanos) {
        System.out.printf(Locale.ROOT, "thread figures over the engine write only, ms per round (connector's write "
                + "%.2f ms, raw %.2f ms): on CPU conn / raw, runnable without a core conn / raw%n", connNanos / 1e6,
                rawNanos / 1e6);
        Map<String, long[]> byName = new java.util.TreeMap<>();
        conn.forEach((k, v) -> {
            long[] a = byName.computeIfAbsent(k, x -> new long[4]);
            a[0] += v[0];
            a[2] += v[1];
        });
        raw.forEach((k, v) -> {
            long[] a = byName.computeIfAbsent(k, x -> new long[4]);
            a[1] += v[0];
            a[3] += v[1];
        });
        long[] tot = new long[4];
        byName.values().forEach(v -> {
            for (int i = 0; i < 4; i++) {
                tot[i] += v[i];
            }
        });
        System.out.printf(Locale.ROOT, "  %-32s %8.2f %8.2f %8.2f %8.2f%n", "(all threads)", tot[0] / 1e6 / rounds,
                tot[1] / 1e6 / rounds, tot[2] / 1e6 / rounds, tot[3] / 1e6 / rounds);
        byName.entrySet().stream().filter(e -> Math.max(e.getValue()[0], e.getValue()[1]) / rounds >= 50_000
                || Math.max(e.getValue()[2], e.getValue()[3]) / rounds >= 500_000)
                .sorted((a, b) -> Long.compare(b.getValue()[0] + b.getValue()[1], a.getValue()[0] + a.getValue()[1]))
                .forEach(e -> System.out.printf(Locale.ROOT, "  %-32s %8.2f %8.2f %8.2f %8.2f%n", e.getKey(),
                        e.getValue()[0] / 1e6 / rounds, e.getValue()[1] / 1e6 / rounds, e.getValue()[2] / 1e6 / rounds,
                        e.getValue()[3] / 1e6 / rounds));
    }

    private static double median(long[] v) {
        long[] s = v.clone();
        Arrays.sort(s);
        return s.length == 0 ? 0 : s[s.length / 2];
    }

    /** Median of each step between consecutive trace points (only meaningful with one wave per round). */
    private static void printBreakdown(long[][] trace) {
        String[] names = new String[trace[0].length];
        names[0] = "D startLoadKv called";
        for (WaveTrace.Point pt : WaveTrace.Point.values()) {
            names[pt.ordinal() + 1] = pt.name();
        }
        names[names.length - 1] = "D getTransferResults sees it";
        System.out.println("per-wave breakdown (µs from the previous point over the rounds: median, mean):");
        for (int i = 1; i < names.length; i++) {
            long[] d = new long[trace.length];
            for (int r = 0; r < trace.length; r++) {
                d[r] = trace[r][i] - trace[r][i - 1];
            }
            System.out.printf(Locale.ROOT, "  %-30s %10.1f %10.1f%n", names[i], median(d) / 1e3,
                    Arrays.stream(d).average().orElse(0) / 1e3);
            if (Boolean.getBoolean("probe.rounds")) {
                System.out.println("    " + Arrays.toString(Arrays.stream(d).map(x -> x / 1000).toArray()));
            }
        }
    }

    /**
     * One round: every block of P to D as requests of {@code perRequest} blocks, all in flight together;
     * D is polled every {@code pollNanos}. {@code t}, when given, gets the round's start, the
     * {@link WaveTrace} points and the moment D reported the last request (all {@code nanoTime}).
     */
    private static int round(PdTestbed.Node p, PdTestbed.Node d, int firstReq, int blocks, int perRequest,
            long pollNanos, long[] t) {
        int n = blocks / perRequest;
        MooncakeConnectorMetadata announce = new MooncakeConnectorMetadata();
        MooncakeConnectorMetadata fin = new MooncakeConnectorMetadata();
        MooncakeConnectorMetadata pulls = new MooncakeConnectorMetadata();
        for (int i = 0; i < n; i++) {
            int r = firstReq + i;
            int[] src = new int[perRequest];
            int[] dst = new int[perRequest];
            for (int k = 0; k < perRequest; k++) {
                src[k] = i * perRequest + k;
                dst[k] = blocks - 1 - (i * perRequest + k); // reversed: one descriptor per block and layer
            }
            announce.addNewReq("p" + r, new int[0][], Map.of("transfer_id", "t" + r), false);
            fin.addNewReq("p" + r, new int[][] {src}, Map.of("transfer_id", "t" + r), false);
            addPull(pulls, "d" + r, "t" + r, "P", p.bootstrapUrl(), dst);
        }
        p.step(announce);
        p.step(fin);
        p.poll();
        long start = System.nanoTime();
        d.step(pulls);
        int left = n;
        long deadline = start + Duration.ofSeconds(60).toNanos();
        while (left > 0) {
            KvConnectorTransferResults res = d.worker.getTransferResults();
            if (!res.failedRecving().isEmpty()) {
                throw new IllegalStateException("loads failed: " + res.failedRecving());
            }
            left -= res.finishedRecving().size();
            d.finishedRecving.addAll(res.finishedRecving());
            if (left > 0) {
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException("round not finished within 60 s");
                }
                if (pollNanos > 0) {
                    LockSupport.parkNanos(pollNanos); // the embedder's polling interval, not synchronisation
                } else {
                    dFinished.await(deadline - System.nanoTime()); // D's signal
                }
            }
        }
        long end = System.nanoTime();
        if (t != null) {
            t[0] = start;
            for (WaveTrace.Point pt : WaveTrace.Point.values()) {
                t[pt.ordinal() + 1] = WaveTrace.last(pt);
            }
            t[t.length - 1] = end;
        }
        // P answered D only after recording the sends: they are in P's next get_finished
        int last = firstReq + n - 1;
        long pDeadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (!p.finishedSending.contains("p" + last)) {
            p.poll();
            if (System.nanoTime() - pDeadline > 0) {
                throw new IllegalStateException("P did not report p" + last + " as sent");
            }
        }
        return firstReq + n;
    }
}
