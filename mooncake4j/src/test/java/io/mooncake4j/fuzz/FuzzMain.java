package io.mooncake4j.fuzz;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs every {@link FuzzTarget} against real nodes ({@code scripts/fuzz.sh}):
 * {@code FuzzMain [--cases N] [--seed S] [--target NAME] [--max-rss-growth-mib M]}.
 *
 * <p>Per target: {@code start()}; a warm-up of the first tenth of the cases (at most 200) and one
 * {@code checkStillServing()}, so that lazily started threads and caches exist; the baseline (platform threads, heap used after GC, RSS
 * from {@code /proc/self/status}); the remaining cases, each with its own {@code Random} derived from
 * the seed, the target and the case number (a failing case is reproducible alone), each bounded by
 * {@value #CASE_TIMEOUT_S} s; {@code checkStillServing()}; the growth over the baseline, with the node
 * still running: more than {@value #MAX_THREAD_GROWTH} threads (after up to 10 s for connections to
 * wind down), {@value #MAX_HEAP_GROWTH_MIB} MiB heap or the RSS tolerance (default
 * {@value #DEFAULT_MAX_RSS_GROWTH_MIB} MiB) fails the target; then {@code close()}.
 *
 * <p>Prints one line per failure and, last, one summary line; exits 0 when nothing failed, 1 when
 * something did, 2 on bad arguments. {@code io.mooncake4j.fuzz.SideChannelFuzzTarget} is loaded by
 * name and skipped with a note when it is not on the class path.
 */
public final class FuzzMain {

    static final int CASE_TIMEOUT_S = 30;
    static final int MAX_THREAD_GROWTH = 2;
    static final int MAX_HEAP_GROWTH_MIB = 32;
    static final int DEFAULT_MAX_RSS_GROWTH_MIB = 96;
    private static final int MAX_FAILURE_LINES = 20;
    private static final String SIDE_CHANNEL = "io.mooncake4j.fuzz.SideChannelFuzzTarget";

    private FuzzMain() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out));
    }

    /** Parses {@code args}, fuzzes, prints to {@code out}; returns the exit status. */
    public static int run(String[] args, PrintStream out) {
        int cases = 10_000;
        long seed = 1;
        String only = null;
        long maxRss = DEFAULT_MAX_RSS_GROWTH_MIB;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--cases" -> cases = Integer.parseInt(args[++i]);
                    case "--seed" -> seed = Long.parseLong(args[++i]);
                    case "--target" -> only = args[++i];
                    case "--max-rss-growth-mib" -> maxRss = Long.parseLong(args[++i]);
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            if (cases < 1) {
                throw new IllegalArgumentException("--cases must be at least 1");
            }
        } catch (RuntimeException e) {
            out.println("fuzz: " + e.getMessage() + "; usage: FuzzMain [--cases N] [--seed S] [--target NAME] "
                    + "[--max-rss-growth-mib M]");
            return 2;
        }
        List<FuzzTarget> targets = targets(out);
        if (only != null) {
            String name = only;
            targets.removeIf(t -> !t.port().equals(name) && !t.getClass().getSimpleName().equals(name));
            if (targets.isEmpty()) {
                out.println("fuzz: no target named " + name);
                return 2;
            }
        }
        Totals totals = new Totals();
        for (int k = 0; k < targets.size(); k++) {
            fuzz(targets.get(k), k, cases, seed, maxRss, totals, out);
        }
        out.println(String.format(Locale.ROOT,
                "fuzz: %d ports, %d cases, seed %d, %d failures, threads %+d, heap %+d MiB, rss %+d MiB",
                targets.size(), totals.cases, seed, totals.failures, totals.threads, totals.heapMib, totals.rssMib));
        return totals.failures == 0 ? 0 : 1;
    }

    private static final class Totals {
        long cases;
        long failures;
        int printed;
        int threads;
        long heapMib;
        long rssMib;

        void fail(PrintStream out, String port, String what) {
            failures++;
            if (printed++ < MAX_FAILURE_LINES) {
                out.println("fuzz: FAIL " + port + ": " + what);
            }
        }
    }

    private static List<FuzzTarget> targets(PrintStream out) {
        List<FuzzTarget> list = new ArrayList<>(List.of(new BootstrapHttpFuzzTarget(), new HandshakeFuzzTarget(),
                new DataPortFuzzTarget()));
        try {
            Class<?> c = Class.forName(SIDE_CHANNEL);
            list.addFirst((FuzzTarget) c.getDeclaredConstructor().newInstance());
        } catch (ClassNotFoundException e) {
            out.println("fuzz: note: " + SIDE_CHANNEL + " is not on the class path; side channel skipped");
        } catch (ReflectiveOperationException | ClassCastException e) {
            out.println("fuzz: note: cannot instantiate " + SIDE_CHANNEL + " (" + e + "); side channel skipped");
        }
        return list;
    }

    /** A case's own random source: reproducible from (seed, target, case) alone. */
    static Random caseRandom(long seed, int target, int caseIndex) {
        long x = seed * 0x9E3779B97F4A7C15L + target * 0xC2B2AE3D27D4EB4FL + caseIndex;
        x ^= x >>> 33;
        x *= 0xFF51AFD7ED558CCDL;
        x ^= x >>> 33;
        return new Random(x);
    }

    private static void fuzz(FuzzTarget t, int index, int cases, long seed, long maxRssMib, Totals totals,
            PrintStream out) {
        String port = t.port();
        try (t) {
            t.start();
            int warmup = Math.min(200, Math.max(1, cases / 10));
            int i = 0;
            for (; i < Math.min(warmup, cases); i++) {
                runCase(t, seed, index, i, totals, out);
            }
            t.checkStillServing(); // the serving path's threads and caches belong to the baseline
            Sample base = Sample.take();
            for (; i < cases; i++) {
                runCase(t, seed, index, i, totals, out);
            }
            try {
                t.checkStillServing();
            } catch (Exception | AssertionError e) {
                totals.fail(out, port, "does not serve a valid request after fuzzing: " + e);
            }
            Sample after = Sample.settled(base.threads + MAX_THREAD_GROWTH);
            int dt = after.threads - base.threads;
            long dh = (after.heap - base.heap) >> 20;
            long dr = base.rss < 0 || after.rss < 0 ? 0 : (after.rss - base.rss) >> 20;
            totals.threads = Math.max(totals.threads, dt);
            totals.heapMib = Math.max(totals.heapMib, dh);
            totals.rssMib = Math.max(totals.rssMib, dr);
            if (dt > MAX_THREAD_GROWTH) {
                totals.fail(out, port, String.format(Locale.ROOT, "platform threads %d -> %d (tolerance +%d)",
                        base.threads, after.threads, MAX_THREAD_GROWTH));
            }
            if (dh > MAX_HEAP_GROWTH_MIB) {
                totals.fail(out, port, String.format(Locale.ROOT, "heap after GC grew %d MiB (tolerance %d MiB)", dh,
                        MAX_HEAP_GROWTH_MIB));
            }
            if (dr > maxRssMib) {
                totals.fail(out, port, String.format(Locale.ROOT, "RSS grew %d MiB (tolerance %d MiB)", dr, maxRssMib));
            }
        } catch (Exception | AssertionError e) {
            totals.fail(out, port, "target failed to start or close: " + e);
        }
    }

    private static void runCase(FuzzTarget t, long seed, int index, int i, Totals totals, PrintStream out) {
        totals.cases++;
        Random r = caseRandom(seed, index, i);
        CompletableFuture<Void> f = new CompletableFuture<>();
        Thread th = Thread.ofVirtual().name("mooncake-fuzz-case").start(() -> {
            try {
                t.runCase(r);
                f.complete(null);
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        });
        try {
            f.get(CASE_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            th.interrupt();
            totals.fail(out, t.port(), String.format(Locale.ROOT, "case %d (seed %d) hung for %d s", i, seed,
                    CASE_TIMEOUT_S));
        } catch (ExecutionException e) {
            totals.fail(out, t.port(), String.format(Locale.ROOT, "case %d (seed %d): %s", i, seed, e.getCause()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            totals.fail(out, t.port(), "interrupted");
        }
    }

    /** Platform threads, heap used after GC, RSS (-1 where /proc is not readable). */
    private record Sample(int threads, long heap, long rss) {

        static Sample take() {
            for (int i = 0; i < 3; i++) {
                System.gc();
            }
            Runtime rt = Runtime.getRuntime();
            return new Sample(Thread.getAllStackTraces().size(), rt.totalMemory() - rt.freeMemory(), readRss());
        }

        /** A sample once the thread count is at most {@code threads}, or after 10 s. */
        static Sample settled(int threads) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (Thread.getAllStackTraces().size() > threads && System.nanoTime() < deadline) {
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
            }
            return take();
        }

        static long readRss() {
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                    if (line.startsWith("VmRSS:")) {
                        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                    }
                }
            } catch (IOException | RuntimeException e) {
                return -1;
            }
            return -1;
        }
    }
}
