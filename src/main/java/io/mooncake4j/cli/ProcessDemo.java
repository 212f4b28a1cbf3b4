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
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code bin/mooncake4j demo --processes}: the demo as separate processes on loopback — a P
 * {@code serve} JVM, a D {@code serve} JVM, a {@code kv_both} reference {@code serve} JVM and a
 * {@code proxy} JVM — with the demo's workload sent through the proxy by a {@link WorkloadClient} in this
 * JVM, every completion checked against the reference node's, then the nodes checked to have freed every
 * block and stopped with SIGTERM (each must exit 0). Each child's output goes to a log file whose path is
 * printed.
 */
final class ProcessDemo {

    private static final Pattern SERVE_READY = Pattern.compile("mooncake4j serve: ready on (http://\\S+)");
    private static final Pattern BOOTSTRAP_PORT = Pattern.compile("mooncake4j serve: .*; bootstrap port (\\d+);");
    private static final Pattern PROXY_READY = Pattern.compile("mooncake4j proxy: ready on port (\\d+)");

    private ProcessDemo() {}

    /** One child JVM, its output copied to a log file and scanned for its ready line. */
    private static final class Child {
        final String role;
        final Process process;
        final Path log;
        final CompletableFuture<String> ready = new CompletableFuture<>();
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
                }
                ready.completeExceptionally(new IOException(role + " exited before it was ready (exit "
                        + process.onExit().join().exitValue() + "); see " + log));
            });
        }

        String awaitReady(Duration timeout) throws Exception {
            try {
                return ready.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new IOException(role + " not ready within " + timeout.toSeconds() + " s; see " + log, e);
            } catch (java.util.concurrent.ExecutionException e) {
                throw new IOException(e.getCause().getMessage(), e.getCause());
            }
        }
    }

    static int run(DemoRunner.Options o, PrintStream out, PrintStream err) throws Exception {
        Path dir = Files.createTempDirectory("mooncake4j-demo-");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> jvm = List.of(java, "--enable-native-access=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx512m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                Main.class.getName());
        ModelPreset m = o.model();
        long bytesPerToken = (long) m.numLayers() * m.pageBytes(1) / m.blockSize();
        long inFlightKv = (long) o.concurrency() * (o.promptTokens() + o.decodeTokens() + m.blockSize())
                * bytesPerToken;
        long perNode = Math.min(DemoRunner.DEFAULT_KV_BUDGET_BYTES, Math.max(4 * inFlightKv, 64L << 20));
        List<Child> children = new ArrayList<>();
        out.printf(Locale.ROOT, "mooncake4j demo --processes: P, D, kv_both reference and proxy as separate JVMs on "
                + "127.0.0.1; logs in %s%n", dir);
        int rc = 1;
        try {
            Child p = serve(children, jvm, "prefill", "kv_producer", o.pTp(), m, perNode / o.pTp(), dir);
            Child d = serve(children, jvm, "decode", "kv_consumer", o.dTp(), m, perNode / o.dTp(), dir);
            Child ref = serve(children, jvm, "reference", "kv_both", 1, m, perNode, dir);
            Duration startup = Duration.ofSeconds(120);
            String pUrl = p.awaitReady(startup);
            String dUrl = d.awaitReady(startup);
            String refUrl = ref.awaitReady(startup);
            if (p.bootstrapPort == null) {
                throw new IOException("the prefill node printed no bootstrap port; see " + p.log);
            }
            Child proxy = new Child("proxy", concat(jvm, "proxy", "--port", "0", "--prefill", pUrl,
                    p.bootstrapPort, "--decode", dUrl), List.of(), PROXY_READY, dir);
            children.add(proxy);
            String proxyUrl = "http://127.0.0.1:" + proxy.awaitReady(startup);
            for (Child c : children) {
                out.printf(Locale.ROOT, "  %-10s pid %-8d %s%n", c.role, c.process.pid(),
                        c.role.equals("proxy") ? proxyUrl : c.ready.getNow("?"));
            }
            WorkloadClient.Options w = new WorkloadClient.Options(URI.create(proxyUrl), URI.create(refUrl), m.name(),
                    o.requests(), o.concurrency(), new int[] {o.promptTokens()}, o.sharedPrefixTokens() > 0 ? 1 : 0,
                    o.sharedPrefixTokens(), new int[] {o.decodeTokens()}, 1, 0, o.seed(), 0, null, null, o.timeout(),
                    bytesPerToken);
            WorkloadClient client = new WorkloadClient(w);
            WorkloadClient.Report r;
            List<String> left;
            try {
                r = client.run();
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
            long received = dStatus.get("kv_bytes_received") instanceof Number n ? n.longValue() : -1;
            long mismatched = dStatus.get("kv_mismatched_words") instanceof Number n ? n.longValue() : -1;
            if (received >= 0) {
                out.printf(Locale.ROOT, "  %-28s %s (%.2f GiB/s over the run), %d mismatched 8-byte words%n",
                        "KV received at D", Bytes.human(received), received / r.seconds() / (1L << 30), mismatched);
            }
            r.print(out, "demo --processes");
            rc = r.wrong() == 0 && r.ok() == o.requests() && left.isEmpty() && mismatched <= 0 ? 0 : 1;
        } finally {
            for (int i = children.size() - 1; i >= 0; i--) {
                children.get(i).process.destroy(); // SIGTERM: serve drains, the proxy stops
            }
            for (Child c : children) {
                if (!c.process.waitFor(60, TimeUnit.SECONDS)) {
                    err.println("mooncake4j demo: " + c.role + " did not stop within 60 s after SIGTERM; killing it");
                    c.process.destroyForcibly();
                    rc = 1;
                } else if (c.process.exitValue() != 0 && c.process.exitValue() != 143) {
                    err.printf(Locale.ROOT, "mooncake4j demo: %s exited %d after SIGTERM; see %s%n", c.role,
                            c.process.exitValue(), c.log);
                    rc = 1;
                }
            }
        }
        out.println(rc == 0 ? "OK: every completion equals the kv_both reference; every process exited cleanly"
                : "FAILED (logs in " + dir + ")");
        return rc;
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
    private static Map<String, Object> status(String url) {
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

    private static List<String> concat(List<String> head, String... tail) {
        List<String> l = new ArrayList<>(head);
        l.addAll(List.of(tail));
        return l;
    }
}
