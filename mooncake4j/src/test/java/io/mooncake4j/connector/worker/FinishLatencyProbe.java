package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;

import io.mooncake4j.connector.worker.loop.WaveTrace;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * How soon D's embedder sees a finished load, the last part of time to first token: P writes one block, answers FINISH, and
 * D's {@code getFinished} is called in a tight loop as an embedder's step would; the probe reports
 * the time from the start of P's write (its engine call; the one-block copy itself takes
 * microseconds) to the first {@code getFinished} that names the request. That span contains P's
 * write, P's loop hand-off, the ZMQ round to D, D's receiver loop and the {@code getFinished} hop,
 * so it bounds "FINISH arrived at D → getFinished sees it" from above. With
 * {@code -Dmooncake4j.waveTrace=true} it also reports the two spans that end at D's view
 * ({@link WaveTrace}): from P's listener writing the FINISH to its ROUTER (loopback TCP included) and from D's I/O thread reading it off the DEALER, each to the first
 * {@code getFinished} naming the request. Not a test; run:
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -Dmooncake4j.waveTrace=true \
 *     -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.connector.worker.FinishLatencyProbe [requests] [spin|signal|pollMicros]
 * </pre>
 * How D's embedder waits: {@code spin} (default) calls {@code getFinished} in a tight loop,
 * {@code signal} parks until D signals a finished load (its finished listener, {@code FinishSignal}), a number
 * pauses that many µs between calls. {@code -Dprobe.warmup} requests (default 2000) run first, then
 * batches of 250 until the JIT compiler threads were on a CPU for at most 1 % of a batch (at most
 * 5 000; {@code -Dprobe.jitSettle=false}: none); the probe prints the JIT's CPU time and the GCs
 * while it measured. With {@code -Dprobe.schedstat=true} the slowest samples also show which
 * threads waited for a core or ran long, and a summary counts, over the slowest 1 %, the samples in
 * which a JIT compiler thread, a GC or a connector thread was on a CPU for 1 ms or more. The last
 * line is a same-run reference: one plain hand-off between two threads with the same wait.
 */
public final class FinishLatencyProbe {

    private FinishLatencyProbe() {
    }

    public static void main(String[] args) throws InterruptedException {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        String mode = args.length > 1 ? args[1] : "spin";
        long pollNanos = mode.equals("spin") || mode.equals("signal") ? 0 : Long.parseLong(mode) * 1_000;
        int warmups = Integer.getInteger("probe.warmup", 2000); // the per-request code compiled, as in a server
        AtomicLong writeStart = new AtomicLong();
        long[] lat;
        long[] fromSent;
        long[] fromRead;
        long[][] points;
        boolean sched = Boolean.getBoolean("probe.schedstat");
        String[] schedDelta;
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(60))) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(c -> {
                if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE) {
                    writeStart.set(System.nanoTime());
                }
            }));
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            dFinished = FinishSignal.on(d.worker);
            // every warm-up request runs the measured code (trace reads, GC counts, schedstat) and drops its figures
            Sampler sampler = new Sampler(p, d, mode, pollNanos, sched, writeStart, n);
            for (int i = -warmups; i < 0; i++) {
                sampler.sample(i, false);
            }
            // then until the JIT has (nearly) stopped compiling: on 2 shared cores its queue lags the
            // fixed warm-up, and a compiler thread on a core is a wait for the path's threads
            int extra = settleJit(sampler);
            long jitAtStart = JvmActivity.jitCpuNanos();
            long[] gcAtStart = JvmActivity.gc();
            long measureStart = System.nanoTime();
            if (Boolean.getBoolean("probe.markMeasured")) { // -XX:+PrintCompilation lines after it: while measured
                System.out.println("measured samples start");
            }
            for (int i = 0; i < n; i++) {
                sampler.sample(i, true);
            }
            long measureNanos = System.nanoTime() - measureStart;
            long[] gcAtEnd = JvmActivity.gc();
            System.out.printf(Locale.ROOT, "warm-up: %d requests, then %d more until the JIT settled; while measured "
                    + "(%.0f ms): JIT compiler threads on CPU %.1f ms, %d GC(s) taking %d ms%n", warmups, extra,
                    measureNanos / 1e6, (JvmActivity.jitCpuNanos() - jitAtStart) / 1e6, gcAtEnd[0] - gcAtStart[0],
                    gcAtEnd[1] - gcAtStart[1]);
            lat = sampler.lat;
            fromSent = sampler.fromSent;
            fromRead = sampler.fromRead;
            points = sampler.points;
            schedDelta = sampler.schedDelta;
            schedMaps = sampler.schedMaps;
            gcMarks = sampler.gcDuring;
        }
        System.out.println("embedder's wait: " + (pollNanos > 0 ? "getFinished every " + pollNanos / 1000 + " us"
                : mode.equals("signal") ? "parked until D's signal, then getFinished" : "getFinished in a tight loop"));
        print("P write start -> D getFinished sees it", n, lat);
        if (WaveTrace.ON) {
            print("P ROUTER send of FINISH -> D getFinished sees it", n, fromSent);
            print("D DEALER read of FINISH -> D getFinished sees it", n, fromRead);
            printTail(points, schedDelta, Integer.getInteger("probe.tail", 10));
            printTailCauses(points, WaveTrace.Point.P_WRITE_START);
            printTailCauses(points, WaveTrace.Point.D_RESPONSE_READ);
        }
        print("reference, same run: one plain thread hand-off (queue + the same wait)", n, handOffs(n, mode, pollNanos));
    }

    /** Per measured sample: garbage collections that ran during it (for the tail lines). */
    private static long[] gcMarks;
    /** D's finished listener, which {@code signal} mode waits on. */
    private static FinishSignal dFinished;
    /** Per measured sample with {@code -Dprobe.schedstat}: each thread's {ran, waited} ns over it. */
    private static java.util.Map<String, long[]>[] schedMaps;

    /** Which kind of thread a schedstat key ({@code tid/name}) is, for the tail summary. */
    private static String kind(String key) {
        String name = key.substring(key.indexOf('/') + 1);
        if (name.startsWith("C1 Compiler") || name.startsWith("C2 Compiler")) {
            return "JIT compiler thread";
        }
        if (name.startsWith("GC Thread") || name.startsWith("G1 ")) {
            return "GC thread";
        }
        if (name.startsWith("mooncake-")) {
            return "connector thread (mooncake-*)";
        }
        if (name.equals("java")) {
            return "the probe's embedder thread";
        }
        return "other thread of this JVM";
    }

    /**
     * Over the slowest 1 % of the samples (at least 5) by the span from {@code from} to D's view: how
     * many had a thread of each kind on a CPU for 1 ms or more, how many overlapped a GC, and how
     * many had none of that (the time went to a wait for a core held by another process, or to
     * something schedstat does not show).
     */
    private static void printTailCauses(long[][] points, WaveTrace.Point from) {
        if (schedMaps == null || schedMaps.length == 0 || schedMaps[0] == null) {
            return;
        }
        WaveTrace.Point[] all = WaveTrace.Point.values();
        int ws = from.ordinal();
        Integer[] order = new Integer[points.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(points[b][all.length] - points[b][ws],
                points[a][all.length] - points[a][ws]));
        int k = Math.min(order.length, Math.max(5, order.length / 100));
        causes("slowest " + k + " samples (" + from + " -> seen)", order, k);
        if (from == WaveTrace.Point.P_WRITE_START) {
            causes("for comparison, all " + order.length + " samples", order, order.length);
        }
    }

    private static void causes(String what, Integer[] order, int k) {
        java.util.Map<String, Integer> counts = new java.util.TreeMap<>();
        int gc = 0;
        int none = 0;
        for (int r = 0; r < k; r++) {
            int i = order[r];
            java.util.Set<String> kinds = new java.util.TreeSet<>();
            schedMaps[i].forEach((key, v) -> {
                if (v[0] >= 1_000_000) {
                    kinds.add(kind(key));
                }
            });
            kinds.forEach(x -> counts.merge(x, 1, Integer::sum));
            boolean g = gcMarks != null && gcMarks[i] > 0;
            gc += g ? 1 : 0;
            none += kinds.isEmpty() && !g ? 1 : 0;
        }
        System.out.printf(Locale.ROOT, "%s, in how many a thread of each kind was on a CPU >= 1 ms: %s; a GC: %d; none "
                + "of these: %d%n", what, counts, gc, none);
    }

    /**
     * One request {@code i}: announced and finished on P, pulled by D, waited for as {@code mode} says;
     * returns the moment D's {@code getFinished} named it. {@code afterSeen} is asked right then and
     * its answer kept in {@code notes[at]}. Then P's own
     * {@code get_finished} names it, so that P's sent set does not grow.
     */
    private static long runOne(PdTestbed.Node p, PdTestbed.Node d, int i, String mode, long pollNanos, int at,
            java.util.function.Supplier<String> afterSeen, String[] notes) {
        String t = "X" + i;
        p.step(announce("p" + i, t));
        p.step(finished("p" + i, t, 1));
        d.step(pull("d" + i, t, "P", p.bootstrapUrl(), 2));
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!d.worker.getFinished().finishedRecving().contains("d" + i)) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("d" + i + " not finished within 20 s");
            }
            if (pollNanos > 0) {
                LockSupport.parkNanos(pollNanos); // the embedder's step interval
            } else if (mode.equals("signal")) {
                dFinished.await(deadline - System.nanoTime());
            } else {
                Thread.onSpinWait();
            }
        }
        long seen = System.nanoTime();
        notes[at] = afterSeen.get();
        // P answered before recording the send: poll P's get_finished until it names it
        while (!p.worker.getFinished().finishedSending().contains("p" + i)) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("p" + i + " not reported sent within 20 s");
            }
            Thread.onSpinWait();
        }
        return seen;
    }

    /** One measured (or warm-up) request with the figures the probe keeps of it. */
    private static final class Sampler {
        final PdTestbed.Node p;
        final PdTestbed.Node d;
        final String mode;
        final long pollNanos;
        final boolean sched;
        final AtomicLong writeStart;
        final long[] lat;
        final long[] fromSent;
        final long[] fromRead;
        final long[][] points; // every trace point of each sample, and the moment D saw it last
        final String[] schedDelta; // per sample: the threads that waited for a CPU (run queue) or ran long
        final java.util.Map<String, long[]>[] schedMaps; // per sample: every thread's {ran, waited} ns over it
        final long[] gcDuring; // per sample: collections during it
        private final String[] scratch = new String[1];

        Sampler(PdTestbed.Node p, PdTestbed.Node d, String mode, long pollNanos, boolean sched, AtomicLong writeStart,
                int n) {
            this.p = p;
            this.d = d;
            this.mode = mode;
            this.pollNanos = pollNanos;
            this.sched = sched;
            this.writeStart = writeStart;
            lat = new long[n];
            fromSent = new long[n];
            fromRead = new long[n];
            points = new long[n][];
            schedDelta = new String[n];
            @SuppressWarnings({"unchecked", "rawtypes"})
            java.util.Map<String, long[]>[] maps = new java.util.Map[n];
            schedMaps = maps;
            gcDuring = new long[n];
        }

        /** Request {@code i} (any int not used before); its figures kept at {@code i} when {@code keep}. */
        void sample(int i, boolean keep) {
            java.util.Map<String, long[]> before = sched ? ThreadSchedStats.snapshot() : null;
            long gc0 = JvmActivity.gc()[0];
            String[] notes = keep ? schedDelta : scratch;
            int at = keep ? i : 0;
            @SuppressWarnings({"unchecked", "rawtypes"})
            java.util.Map<String, long[]>[] delta = new java.util.Map[1];
            long seen = runOne(p, d, i, mode, pollNanos, at, () -> {
                if (before == null) {
                    return null;
                }
                delta[0] = ThreadSchedStats.diff(before, ThreadSchedStats.snapshot());
                return ThreadSchedStats.notable(delta[0]);
            }, notes);
            if (keep) {
                schedMaps[i] = delta[0];
            }
            long gc = JvmActivity.gc()[0] - gc0;
            long[] pt = new long[WaveTrace.Point.values().length + 1];
            for (WaveTrace.Point q : WaveTrace.Point.values()) {
                pt[q.ordinal()] = WaveTrace.last(q);
            }
            pt[pt.length - 1] = seen;
            if (keep) {
                lat[i] = seen - writeStart.get();
                fromSent[i] = seen - WaveTrace.last(WaveTrace.Point.P_REPLY_SENT);
                fromRead[i] = seen - WaveTrace.last(WaveTrace.Point.D_RESPONSE_READ);
                points[i] = pt;
                gcDuring[i] = gc;
            }
        }
    }

    /**
     * More warm-up requests, in batches of 250, until the JIT compiler threads were on a CPU for at
     * most 1 % of one batch's time (at most 20 batches; {@code -Dprobe.jitSettle=false}: none). Returns
     * how many requests it ran. Ids go on below the fixed warm-up's.
     */
    private static int settleJit(Sampler sampler) {
        if (!Boolean.parseBoolean(System.getProperty("probe.jitSettle", "true")) || JvmActivity.jitCpuNanos() < 0) {
            return 0;
        }
        int id = -1_000_000;
        for (int batch = 0; batch < 20; batch++) {
            long c0 = JvmActivity.jitCpuNanos();
            long t0 = System.nanoTime();
            for (int k = 0; k < 250; k++) {
                sampler.sample(id++, false);
            }
            if (JvmActivity.jitCpuNanos() - c0 <= (System.nanoTime() - t0) / 100) {
                break;
            }
        }
        return id + 1_000_000;
    }

    /**
     * What one thread hand-off costs on this machine now: a thread stamps the time and queues it (as
     * D's I/O thread queues a finished request), the main thread waits as the embedder did above.
     */
    private static long[] handOffs(int n, String mode, long pollNanos) throws InterruptedException {
        java.util.concurrent.ConcurrentLinkedQueue<Long> q = new java.util.concurrent.ConcurrentLinkedQueue<>();
        java.util.concurrent.SynchronousQueue<Boolean> go = new java.util.concurrent.SynchronousQueue<>();
        Thread main = Thread.currentThread();
        long[] lat = new long[n];
        Thread sender = new Thread(() -> {
            try {
                while (go.take()) {
                    LockSupport.parkNanos(200_000); // let the main thread settle into its wait
                    q.add(System.nanoTime());
                    LockSupport.unpark(main);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "probe-hand-off");
        sender.setDaemon(true);
        sender.start();
        for (int i = -200; i < n; i++) {
            go.put(Boolean.TRUE);
            Long stamp;
            while ((stamp = q.poll()) == null) {
                if (pollNanos > 0) {
                    LockSupport.parkNanos(pollNanos);
                } else if (mode.equals("signal")) {
                    LockSupport.park();
                } else {
                    Thread.onSpinWait();
                }
            }
            long seen = System.nanoTime();
            if (i >= 0) {
                lat[i] = seen - stamp;
            }
        }
        go.put(Boolean.FALSE);
        sender.join();
        return lat;
    }

    /**
     * The {@code k} slowest samples (P write start → seen), step by step: the µs from each trace point
     * to the next one this sample passed, so that a tail sample shows which hop held it.
     */
    private static void printTail(long[][] points, String[] sched, int k) {
        WaveTrace.Point[] all = WaveTrace.Point.values();
        int ws = WaveTrace.Point.P_WRITE_START.ordinal();
        Integer[] order = new Integer[points.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> Long.compare(points[b][all.length] - points[b][ws],
                points[a][all.length] - points[a][ws]));
        StringBuilder head = new StringBuilder("slowest samples, us from the previous point:");
        for (int j = ws + 1; j <= all.length; j++) {
            head.append(' ').append(j < all.length ? all[j].name() : "SEEN");
        }
        System.out.println(head);
        for (int r = 0; r < Math.min(k, order.length); r++) {
            long[] pt = points[order[r]];
            StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "  #%d total %.3f ms:", order[r],
                    (pt[all.length] - pt[ws]) / 1e6));
            for (int j = ws + 1; j <= all.length; j++) {
                line.append(String.format(Locale.ROOT, " %d", (pt[j] - pt[j - 1]) / 1000));
            }
            if (gcMarks != null && gcMarks[order[r]] > 0) {
                line.append("; GC during it");
            }
            if (sched[order[r]] != null) {
                line.append("; ").append(sched[order[r]]);
            }
            System.out.println(line);
        }
    }

    private static void print(String what, int n, long[] lat) {
        Arrays.sort(lat);
        System.out.printf(Locale.ROOT, "%s, %d samples: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms%n",
                what, n, lat[n / 2] / 1e6, lat[n * 9 / 10] / 1e6, lat[Math.min(n - 1, n * 99 / 100)] / 1e6,
                lat[n - 1] / 1e6);
    }
}
