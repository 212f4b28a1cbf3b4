package io.mooncake4j.cli;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.proxy.WorkloadClient;
import io.mooncake4j.sim.DemoRunner;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code bin/mooncake4j demo --processes}: the demo as separate processes on loopback — a P
 * {@code serve} JVM, a D {@code serve} JVM, a {@code kv_both} reference {@code serve} JVM and a
 * {@code proxy} JVM — with the demo's workload sent through the proxy by a {@link WorkloadClient} in this
 * JVM, every completion checked against the reference node's (the reference answers every request first
 * and is then stopped, before the timed run, and must exit cleanly), then the nodes checked to have freed every
 * block and stopped with SIGTERM (each must exit 0). Each child's output goes to a log file in a temporary
 * directory, which is removed when the run ends, also when it fails (the end of every log is printed to the
 * error stream then) or when this JVM is stopped (a shutdown hook stops the children and removes it).
 * After the run it prints the CPU time each process spent in the timed part ({@link ProcessHandle.Info}).
 */
final class ProcessDemo {

    static final Pattern SERVE_READY = Pattern.compile("mooncake4j serve: ready on (http://\\S+)");
    private static final Pattern BOOTSTRAP_PORT = Pattern.compile("mooncake4j serve: .*; bootstrap port (\\d+);");
    static final Pattern PROXY_READY = Pattern.compile("mooncake4j proxy: ready on port (\\d+)");

    private ProcessDemo() {}

    /** One child JVM, its output copied to a log file and scanned for its ready line. */
    static final class Child {
        final String role;
        final Process process;
        final Path log;
        final CompletableFuture<String> ready = new CompletableFuture<>();
        /** Completes when the log copier stopped (the child's output ended and the log file is closed). */
        final CompletableFuture<Void> logClosed = new CompletableFuture<>();
        /** A serve node's bootstrap port as its start line says (P), set before it is ready. */
        volatile String bootstrapPort;

        Child(String role, List<String> command, List<String> env, Pattern readyLine, Path dir) throws IOException {
            this.role = role;
            this.log = dir.resolve(role + ".log");
            ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
            for (String kv : env) {
                int eq = kv.indexOf('=');
                pb.environment().put(kv.substring(0, eq), kv.substring(eq + 1));
            }
            this.process = pb.start();
            Thread.ofVirtual().name("mooncake-demo-" + role + "-log").start(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                        StandardCharsets.UTF_8)); var w = Files.newBufferedWriter(log)) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        w.write(line);
                        w.newLine();
                        w.flush();
                        Matcher b = BOOTSTRAP_PORT.matcher(line);
                        if (b.find()) {
                            bootstrapPort = b.group(1);
                        }
                        Matcher m = readyLine.matcher(line);
                        if (m.find()) {
                            ready.complete(m.group(1));
                        }
                    }
                } catch (IOException e) {
                    ready.completeExceptionally(e);
                } finally {
                    logClosed.complete(null);
                }
                ready.completeExceptionally(new IOException(role + " exited before it was ready (exit "
                        + process.onExit().join().exitValue() + "; the end of its log is printed above)"));
            });
        }

        void awaitLogClosed(Duration timeout) {
            try {
                logClosed.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (java.util.concurrent.ExecutionException | TimeoutException e) {
                // the copier is stuck on a pipe a grandchild holds: the log may be removed under it
            }
        }

        String awaitReady(Duration timeout) throws Exception {
            try {
                return ready.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new IOException(role + " not ready within " + timeout.toSeconds() + " s (the end of its log is printed above)", e);
            } catch (java.util.concurrent.ExecutionException e) {
                throw new IOException(e.getCause().getMessage(), e.getCause());
            }
        }
    }

    /** Environment variable with extra JVM options for every child (e.g. a JFR recording with {@code %p} in its file name). */
    static final String CHILD_JAVA_OPTS_ENV = "MOONCAKE4J_DEMO_JAVA_OPTS";

    /**
     * Runs the demo.
     *
     * @param warmup requests of the same shape sent through the proxy first, not counted
     */
    static int run(DemoRunner.Options o, int warmup, PrintStream out, PrintStream err) throws Exception {
        String opts = System.getenv(CHILD_JAVA_OPTS_ENV);
        List<String> childOpts = opts == null || opts.isBlank() ? List.of() : List.of(opts.trim().split("\\s+"));
        return run(o, warmup, out, err, Path.of(System.getProperty("java.io.tmpdir")), childOpts);
    }

    /**
     * Runs the demo with the children's logs in a fresh directory under {@code tempParent}, removed when the run
     * ends, whether it succeeded or not (on failure the tail of each log is printed to {@code err} first), and
     * by a shutdown hook when this JVM is stopped mid-run (which also stops the children).
     *
     * @param childJvmOptions extra options for every child JVM, before the main class
     */
    static int run(DemoRunner.Options o, int warmup, PrintStream out, PrintStream err, Path tempParent,
            List<String> childJvmOptions) throws Exception {
        Path dir = Files.createTempDirectory(Files.createDirectories(tempParent), "mooncake4j-demo-");
        List<Child> children = new CopyOnWriteArrayList<>();
        Thread hook = new Thread(() -> {
            stopAll(children, Duration.ofSeconds(10));
            deleteTree(dir);
        }, "mooncake-demo-cleanup-0");
        Runtime.getRuntime().addShutdownHook(hook);
        int rc = 1;
        try {
            rc = runIn(dir, children, o, warmup, out, err, childJvmOptions);
        } finally {
            for (Child c : children) {
                if (!c.process.isAlive() && c.process.exitValue() != 0 && c.process.exitValue() != 143) {
                    rc = 1;
                }
            }
            stopAll(children, Duration.ofSeconds(60));
            if (rc != 0) {
                for (Child c : children) {
                    printTail(c, err, 20);
                }
            }
            deleteTree(dir);
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running or about to: it finds nothing left to do
            }
        }
        return rc;
    }

    private static int runIn(Path dir, List<Child> children, DemoRunner.Options o, int warmup, PrintStream out,
            PrintStream err, List<String> childJvmOptions) throws Exception {
        List<String> options = new ArrayList<>(List.of("-XX:+UseSerialGC", "-Xmx512m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        options.addAll(childJvmOptions);
        List<String> jvm = NodeJvm.command(options);
        ModelPreset m = o.model();
        long bytesPerToken = (long) m.numLayers() * m.pageBytes(1) / m.blockSize();
        long inFlightKv = (long) o.concurrency() * (o.promptTokens() + o.decodeTokens() + m.blockSize())
                * bytesPerToken;
        long perNode = Math.min(DemoRunner.DEFAULT_KV_BUDGET_BYTES, Math.max(4 * inFlightKv, 64L << 20));
        out.printf(Locale.ROOT, "mooncake4j demo --processes: P, D, kv_both reference and proxy as separate JVMs on "
                + "127.0.0.1; logs in %s (removed at the end)%n", dir);
        int rc;
        Child p = serve(children, jvm, "prefill", "kv_producer", o.pTp(), m, perNode / o.pTp(), dir);
        Child d = serve(children, jvm, "decode", "kv_consumer", o.dTp(), m, perNode / o.dTp(), dir);
        Child ref = serve(children, jvm, "reference", "kv_both", 1, m, perNode, dir);
        Duration startup = Duration.ofSeconds(120);
        String pUrl = p.awaitReady(startup);
        String dUrl = d.awaitReady(startup);
        String refUrl = ref.awaitReady(startup);
        if (p.bootstrapPort == null) {
            throw new IOException("the prefill node printed no bootstrap port (the end of its log is printed above)");
        }
        Child proxy = new Child("proxy", concat(jvm, "proxy", "--port", "0", "--prefill", pUrl,
                p.bootstrapPort, "--decode", dUrl), List.of(), PROXY_READY, dir);
        children.add(proxy);
        String proxyUrl = "http://127.0.0.1:" + proxy.awaitReady(startup);
        for (Child c : children) {
            out.printf(Locale.ROOT, "  %-10s pid %-8d %s%n", c.role, c.process.pid(),
                    c.role.equals("proxy") ? proxyUrl : c.ready.getNow("?"));
        }
        if (warmup > 0) {
            WorkloadClient.Options wo = new WorkloadClient.Options(URI.create(proxyUrl), null, m.name(), warmup,
                    o.concurrency(), new int[] {o.promptTokens()}, o.sharedPrefixTokens() > 0 ? 1 : 0,
                    o.sharedPrefixTokens(), new int[] {o.decodeTokens()}, 1, 0, o.seed() + 1, 0, null, null,
                    o.timeout(), bytesPerToken);
            try (WorkloadClient wc = new WorkloadClient(wo)) {
                WorkloadClient.Report wr = wc.run();
                out.printf(Locale.ROOT, "mooncake4j demo --processes: warm-up of %d requests: %d answered, %.1f s "
                        + "(not counted below)%n", warmup, wr.unchecked(), wr.seconds());
                if (wr.unchecked() != warmup) {
                    wr.print(out, "warm-up");
                    return 1;
                }
            }
        }
        long receivedBefore = status(dUrl).get("kv_bytes_received") instanceof Number n ? n.longValue() : 0;
        WorkloadClient.Options w = new WorkloadClient.Options(URI.create(proxyUrl), URI.create(refUrl), m.name(),
                o.requests(), o.concurrency(), new int[] {o.promptTokens()}, o.sharedPrefixTokens() > 0 ? 1 : 0,
                o.sharedPrefixTokens(), new int[] {o.decodeTokens()}, 1, 0, o.seed(), 0, null, null, o.timeout(),
                bytesPerToken);
        WorkloadClient client = new WorkloadClient(w);
        WorkloadClient.Report r;
        List<String> left;
        long[] cpuAtStart = new long[children.size() + 1];
        long[] cpuAtEnd = new long[children.size() + 1];
        boolean byThread = threadCpuWanted();
        List<Map<String, Long>> threadsAtStart = new ArrayList<>();
        List<Map<String, Long>> threadsAtEnd = new ArrayList<>();
        try {
            r = client.run(() -> {
                // every reference answer is in: the reference JVM stops, so the timed run has the machine
                // to P, D, the proxy and the client, as the in-JVM demo has it to its one JVM
                stopReference(ref, err);
                cpuTimes(children, cpuAtStart, null);
                if (byThread) {
                    threadCpu(children, threadsAtStart);
                }
            });
            cpuTimes(children, cpuAtEnd, cpuAtStart);
            if (byThread) {
                threadCpu(children, threadsAtEnd);
            }
            left = client.awaitDrained(List.of(URI.create(pUrl), URI.create(dUrl)), Duration.ofSeconds(90));
        } finally {
            client.close();
        }
        out.printf(Locale.ROOT, "%nmooncake4j demo --processes: %s, P tp %d -> D tp %d, %d requests x %d tokens "
                + "(%d shared), %d decode tokens, all streamed, %d in flight%n", m.name(), o.pTp(), o.dTp(),
                o.requests(), o.promptTokens(), o.sharedPrefixTokens(), o.decodeTokens(), o.concurrency());
        for (String l : left) {
            out.println("  " + l);
        }
        if (left.isEmpty()) {
            out.println("  P and D freed every block after the run");
        }
        Map<String, Object> dStatus = status(dUrl);
        long received = dStatus.get("kv_bytes_received") instanceof Number n ? n.longValue() - receivedBefore : -1;
        long mismatched = dStatus.get("kv_mismatched_words") instanceof Number n ? n.longValue() : -1;
        if (received >= 0) {
            out.printf(Locale.ROOT, "  %-28s %s (%.2f GiB/s over the run), %d mismatched 8-byte words%n",
                    "KV received at D", Bytes.human(received), received / r.seconds() / (1L << 30), mismatched);
        }
        printCpu(out, children, cpuAtStart, cpuAtEnd, received);
        if (byThread) {
            printThreadCpu(out, children, threadsAtStart, threadsAtEnd, cpuAtStart, cpuAtEnd);
        }
        r.print(out, "demo --processes");
        rc = r.wrong() == 0 && r.ok() == o.requests() && left.isEmpty() && mismatched <= 0 ? 0 : 1;
        rc = stopAll(children, Duration.ofSeconds(60), err) ? rc : 1;
        out.println(rc == 0 ? "OK: every completion equals the kv_both reference; every process exited cleanly"
                : "FAILED");
        return rc;
    }

    /** Environment variable: {@code 1} adds the CPU of each process's thread groups over the timed run (Linux). */
    static final String THREAD_CPU_ENV = "MOONCAKE4J_DEMO_THREAD_CPU";

    private static boolean threadCpuWanted() {
        return "1".equals(System.getenv(THREAD_CPU_ENV)) && Files.isDirectory(Path.of("/proc/self/task"));
    }

    /** Per child, then this JVM: CPU clock ticks (user + system) so far per thread group ({@link #threadGroup}). */
    private static void threadCpu(List<Child> children, List<Map<String, Long>> into) {
        for (Child c : children) {
            into.add(ThreadTicks.of(c.process.pid()));
        }
        into.add(ThreadTicks.of(ProcessHandle.current().pid()));
    }

    /**
     * Per process, its thread groups' CPU seconds over the timed run, largest first; threads that ended
     * in the run are in {@code exited/other} (the process's total less the groups').
     */
    private static void printThreadCpu(PrintStream out, List<Child> children, List<Map<String, Long>> start,
            List<Map<String, Long>> end, long[] cpuStart, long[] cpuEnd) {
        out.printf(Locale.ROOT, "  %-28s (%s=1; CPU s of each thread group over the run, Linux thread names are "
                + "cut at 15 characters)%n", "CPU by thread group", THREAD_CPU_ENV);
        for (int i = 0; i < start.size() && i < end.size(); i++) {
            Map<String, Long> d = ThreadTicks.delta(start.get(i), end.get(i));
            double total = (cpuEnd[i] - cpuStart[i]) / 1e9;
            double sum = 0;
            StringBuilder sb = new StringBuilder();
            for (Map.Entry<String, Long> e : d.entrySet()) {
                double s = e.getValue() / (double) ThreadTicks.HZ;
                sum += s;
                if (s >= 0.05) {
                    sb.append(String.format(Locale.ROOT, "%s %.2f, ", e.getKey(), s));
                }
            }
            sb.append(String.format(Locale.ROOT, "exited/other %.2f", Math.max(0, total - sum)));
            out.printf(Locale.ROOT, "    %-10s %s%n", i < children.size() ? children.get(i).role : "client", sb);
        }
    }

    /** CPU ticks per thread group read from {@code /proc/PID/task/TID/stat} (Linux). */
    static final class ThreadTicks {
        /** Clock ticks per second of {@code utime}/{@code stime} ({@code USER_HZ}, 100 on Linux). */
        static final int HZ = 100;

        private ThreadTicks() {}

        static Map<String, Long> of(long pid) {
            Map<String, Long> m = new java.util.HashMap<>();
            try (var tasks = Files.list(Path.of("/proc", Long.toString(pid), "task"))) {
                for (Path t : tasks.toList()) {
                    try {
                        String stat = Files.readString(t.resolve("stat"), StandardCharsets.US_ASCII);
                        int open = stat.indexOf('(');
                        int close = stat.lastIndexOf(')');
                        String[] f = stat.substring(close + 2).split(" ");
                        // after "pid (comm) ": state is f[0], utime f[11], stime f[12]
                        long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]);
                        m.merge(group(stat.substring(open + 1, close)), ticks, Long::sum);
                    } catch (IOException | RuntimeException gone) {
                        // the thread ended while listed
                    }
                }
            } catch (IOException | RuntimeException e) {
                // the process ended
            }
            return m;
        }

        /** A thread name without its trailing number ({@code C2 CompilerThread0} and {@code 1} are one group). */
        static String group(String comm) {
            return comm.replaceAll("[-#]?[0-9]+$", "").replaceAll("-[0-9]+-", "-N-");
        }

        /** Ticks per group from {@code a} to {@code b}, largest first. */
        static Map<String, Long> delta(Map<String, Long> a, Map<String, Long> b) {
            Map<String, Long> d = new java.util.LinkedHashMap<>();
            b.entrySet().stream()
                    .map(e -> Map.entry(e.getKey(), e.getValue() - a.getOrDefault(e.getKey(), 0L)))
                    .filter(e -> e.getValue() > 0)
                    .sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                    .forEach(e -> d.put(e.getKey(), e.getValue()));
            return d;
        }
    }

    /**
     * Stops the reference node (SIGTERM; it drains and must exit 0 or 143, which {@link #stopAll} checks at the
     * end); a node that does not stop within 60 s is killed and reported.
     */
    private static void stopReference(Child ref, PrintStream err) {
        ref.process.destroy();
        try {
            if (!ref.process.waitFor(60, TimeUnit.SECONDS)) {
                err.println("mooncake4j demo: the reference node did not stop within 60 s after SIGTERM; killing it");
                ref.process.destroyForcibly();
                ref.process.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ref.process.destroyForcibly();
        }
    }

    /**
     * CPU time so far of each child, then of this JVM (the client), in nanoseconds (-1 when unknown); 0 for a
     * child that had exited at the start reading ({@code start} null: this is it; the reference, stopped before
     * the timed run), so it counts as no CPU in the run.
     */
    private static void cpuTimes(List<Child> children, long[] into, long[] start) {
        for (int i = 0; i < children.size() && i < into.length - 1; i++) {
            Process p = children.get(i).process;
            boolean exitedBefore = start == null ? !p.isAlive() : start[i] == 0;
            into[i] = exitedBefore ? 0 : cpuNanos(p.toHandle());
        }
        into[into.length - 1] = cpuNanos(ProcessHandle.current());
    }

    private static long cpuNanos(ProcessHandle h) {
        return h.info().totalCpuDuration().map(Duration::toNanos).orElse(-1L);
    }

    /** One line: CPU seconds each process spent in the timed run, and their sum per GiB of KV that reached D. */
    private static void printCpu(PrintStream out, List<Child> children, long[] start, long[] end, long kvBytes) {
        StringBuilder sb = new StringBuilder();
        StringBuilder perGib = new StringBuilder();
        double gib = kvBytes / (double) (1L << 30);
        double total = 0;
        for (int i = 0; i < start.length; i++) {
            if (start[i] < 0 || end[i] < 0) {
                return; // the platform does not tell
            }
            double s = (end[i] - start[i]) / 1e9;
            total += s;
            String role = i == start.length - 1 ? "client" : children.get(i).role;
            if (i < children.size() && start[i] == 0 && end[i] == 0) {
                role += " (stopped before the run)";
            }
            sb.append(role).append(String.format(Locale.ROOT, " %.1f s, ", s));
            perGib.append(role).append(String.format(Locale.ROOT, " %.3f, ", s / gib));
        }
        out.printf(Locale.ROOT, "  %-28s %stotal %.1f s%s%n", "CPU time over the run", sb, total, kvBytes > 0
                ? String.format(Locale.ROOT, " (%.2f s per GiB of KV)", total / gib) : "");
        if (kvBytes > 0) {
            out.printf(Locale.ROOT, "  %-28s %stotal %.3f%n", "CPU s per GiB of KV", perGib, total / gib);
        }
    }

    /** SIGTERM to every child still running (serve drains, the proxy stops), newest first; SIGKILL after {@code wait}. */
    static void stopAll(List<Child> children, Duration wait) {
        stopAll(children, wait, null);
    }

    /** As {@link #stopAll(List, Duration)}; reports to {@code err} (when not null) a child that did not stop cleanly. */
    static boolean stopAll(List<Child> children, Duration wait, PrintStream err) {
        boolean clean = true;
        for (int i = children.size() - 1; i >= 0; i--) {
            children.get(i).process.destroy();
        }
        long deadline = System.nanoTime() + wait.toNanos();
        for (Child c : children) {
            try {
                if (!c.process.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    if (err != null) {
                        err.println("mooncake4j demo: " + c.role + " did not stop within " + wait.toSeconds()
                                + " s after SIGTERM; killing it");
                    }
                    c.process.destroyForcibly();
                    c.process.waitFor(10, TimeUnit.SECONDS);
                    clean = false;
                } else if (c.process.exitValue() != 0 && c.process.exitValue() != 143) {
                    if (err != null) {
                        err.printf(Locale.ROOT, "mooncake4j demo: %s exited %d after SIGTERM%n", c.role,
                                c.process.exitValue());
                    }
                    clean = false;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                c.process.destroyForcibly();
                clean = false;
            }
            c.awaitLogClosed(Duration.ofSeconds(5));
        }
        return clean;
    }

    /** The last {@code lines} lines of a child's log, to {@code err}. */
    static void printTail(Child c, PrintStream err, int lines) {
        try {
            List<String> all = Files.readAllLines(c.log, StandardCharsets.UTF_8);
            err.printf(Locale.ROOT, "mooncake4j demo: last lines of %s's log (exit %s):%n", c.role,
                    c.process.isAlive() ? "running" : Integer.toString(c.process.exitValue()));
            for (String l : all.subList(Math.max(0, all.size() - lines), all.size())) {
                err.println("  | " + l);
            }
        } catch (IOException | RuntimeException e) {
            err.println("mooncake4j demo: cannot read " + c.log + ": " + e.getMessage());
        }
    }

    /** Removes {@code dir} and everything under it; a failure is reported, not thrown. */
    static void deleteTree(Path dir) {
        if (!Files.exists(dir)) {
            return;
        }
        try (var walk = Files.walk(dir)) {
            for (Path q : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        } catch (IOException | RuntimeException e) {
            System.err.println("mooncake4j demo: could not remove " + dir + ": " + e.getMessage());
        }
    }

    private static Child serve(List<Child> children, List<String> jvm, String name, String role, int tp,
            ModelPreset m, long kvBytesPerRank, Path dir) throws IOException {
        String config = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}";
        long perBlock = (long) m.numLayers() * m.pageBytes(tp);
        Child c = new Child(name, concat(jvm, "serve", "--model", m.name(), "--host", "127.0.0.1", "--port", "0",
                "--tensor-parallel-size", Integer.toString(tp), "--kv-cache-memory",
                Long.toString(Math.max(perBlock * 8, kvBytesPerRank)), "--drain-timeout", "10",
                "--kv-transfer-config", config),
                List.of("VLLM_MOONCAKE_BOOTSTRAP_PORT=0", "VLLM_HOST_IP=127.0.0.1",
                        "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=30"), SERVE_READY, dir);
        children.add(c);
        return c;
    }

    /** A node's {@code GET /mooncake/status} (empty when it cannot be read). */
    static Map<String, Object> status(String url) {
        try (HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url + "/mooncake/status"))
                    .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
            return r.statusCode() == 200 ? Json.parseObject(r.body()) : Map.of();
        } catch (IOException | RuntimeException e) {
            return Map.of();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Map.of();
        }
    }

    static List<String> concat(List<String> head, String... tail) {
        List<String> l = new ArrayList<>(head);
        l.addAll(List.of(tail));
        return l;
    }
}
