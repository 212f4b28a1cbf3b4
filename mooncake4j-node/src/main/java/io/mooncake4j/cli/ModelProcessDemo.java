package io.mooncake4j.cli;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.model.JlamaModel;
import io.mooncake4j.model.ModelDemo;

import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * {@code bin/mooncake4j demo --model DIR --processes}: the model demo as separate processes on
 * loopback — a P {@code serve --model DIR} JVM, a D one, a {@code kv_both} reference one and a
 * {@code proxy} JVM in front of P and D — with the demo's prompts ({@link ModelDemo#prompts}) sent as
 * token ids, greedy, to the reference and then through the proxy, one after the other; every answer's
 * text and completion-token count compared, one verdict line at the end. The children's logs go to a
 * temporary directory, removed when the run ends (their tails are printed to the error stream when it
 * fails); a shutdown hook stops the children if this JVM is stopped mid-run. Every child must exit
 * cleanly after SIGTERM before the verdict is {@code OK}.
 *
 * <p>An OpenAI answer carries text, not token ids: two answers are compared by their text and their
 * {@code completion_tokens}. With the tiny model's character-level tokenizer that is token for token;
 * with a real tokenizer two token sequences of one text would pass (the in-JVM demo compares ids).
 *
 * <p>Single-threaded use: {@link #run} blocks until the run ended.
 */
final class ModelProcessDemo {

    /** Tokens per KV block of the serve nodes (their default). */
    private static final int BLOCK = 16;

    private ModelProcessDemo() {}

    /**
     * Runs the demo; returns the exit code (0: every answer equal and every process exited cleanly).
     *
     * @param childJvmOptions extra options for every child JVM, before the main class
     */
    static int run(ModelDemo.Options o, PrintStream out, PrintStream err, Path tempParent,
            List<String> childJvmOptions) throws Exception {
        Path dir = Files.createTempDirectory(Files.createDirectories(tempParent), "mooncake4j-model-demo-");
        List<ProcessDemo.Child> children = new CopyOnWriteArrayList<>();
        Thread hook = new Thread(() -> {
            ProcessDemo.stopAll(children, Duration.ofSeconds(10));
            ProcessDemo.deleteTree(dir);
        }, "mooncake-model-demo-cleanup-0");
        Runtime.getRuntime().addShutdownHook(hook);
        int rc = 1;
        try (JlamaModel model = JlamaModel.load(o.dir(), o.dtype())) {
            long tokens = runIn(dir, children, model, o, out, childJvmOptions);
            boolean clean = ProcessDemo.stopAll(children, Duration.ofSeconds(60), err);
            if (tokens >= 0 && !clean) {
                out.println("FAILED: a process did not exit cleanly after SIGTERM (its log is printed to the error "
                        + "stream)");
            } else if (tokens >= 0) {
                out.printf(Locale.ROOT, "OK: disaggregated tokens equal single-node tokens (%d requests, %d tokens)%n",
                        o.requests(), tokens);
                rc = 0;
            }
        } finally {
            ProcessDemo.stopAll(children, Duration.ofSeconds(60), err);
            if (rc != 0) {
                for (ProcessDemo.Child c : children) {
                    ProcessDemo.printTail(c, err, 20);
                }
            }
            ProcessDemo.deleteTree(dir);
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook is running or about to: it finds nothing left to do
            }
        }
        return rc;
    }

    /** Runs the requests; returns the tokens compared, or -1 after printing the first difference. */
    private static long runIn(Path dir, List<ProcessDemo.Child> children, JlamaModel model, ModelDemo.Options o,
            PrintStream out, List<String> childJvmOptions) throws Exception {
        if (!o.protocol().equals("tcp")) {
            throw new IllegalArgumentException("--processes runs serve nodes over TCP; --protocol " + o.protocol()
                    + " is for the in-JVM demo");
        }
        List<int[]> prompts = ModelDemo.prompts(model, o.requests(), o.decode(), o.seed());
        int longest = prompts.stream().mapToInt(p -> p.length).max().orElse(1);
        // every request of the run may still hold blocks at P until D pulled them: room for all of them
        int blocks = o.requests() * ((longest + o.decode()) / BLOCK + 2) + 8;
        List<String> options = new ArrayList<>(List.of("-XX:+UseSerialGC", "-Xmx1g",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        options.addAll(childJvmOptions);
        List<String> jvm = NodeJvm.command(options);
        out.printf(Locale.ROOT, "mooncake4j demo --model %s --processes: P, D, kv_both reference and proxy as "
                + "separate JVMs on 127.0.0.1 (%s%s); logs in %s (removed at the end)%n", o.dir(), model.kvLayout(),
                o.layerwise() ? ", layer-wise push" : "", dir);
        ProcessDemo.Child p = serve(children, jvm, "prefill", "kv_producer", o, blocks, dir);
        ProcessDemo.Child d = serve(children, jvm, "decode", "kv_consumer", o, blocks, dir);
        ProcessDemo.Child ref = serve(children, jvm, "reference", "kv_both", o, blocks, dir);
        Duration startup = Duration.ofSeconds(180);
        String pUrl = p.awaitReady(startup);
        String dUrl = d.awaitReady(startup);
        String refUrl = ref.awaitReady(startup);
        if (p.bootstrapPort == null) {
            throw new IOException("the prefill node printed no bootstrap port (the end of its log is printed above)");
        }
        ProcessDemo.Child proxy = new ProcessDemo.Child("proxy", ProcessDemo.concat(jvm, "proxy", "--port", "0",
                "--prefill", pUrl, p.bootstrapPort, "--decode", dUrl), List.of(), ProcessDemo.PROXY_READY, dir);
        children.add(proxy);
        String proxyUrl = "http://127.0.0.1:" + proxy.awaitReady(startup);
        for (ProcessDemo.Child c : children) {
            out.printf(Locale.ROOT, "  %-10s pid %-8d %s%n", c.role, c.process.pid(),
                    c.role.equals("proxy") ? proxyUrl : c.ready.getNow("?"));
        }
        String name = o.dir().toAbsolutePath().normalize().getFileName().toString();
        long tokens = 0;
        long t0 = System.nanoTime();
        try (HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()) {
            for (int i = 0; i < prompts.size(); i++) {
                Map<String, Object> body = new LinkedHashMap<>();
                body.put("model", name);
                body.put("prompt", toList(prompts.get(i)));
                body.put("max_tokens", o.decode());
                body.put("temperature", 0);
                Answer want = complete(http, refUrl, body, o.timeout());
                Answer got = complete(http, proxyUrl, body, o.timeout());
                String failure = want.error != null ? "request " + i + ": the single node failed: " + want.error
                        : got.error != null ? "request " + i + ": the P/D pair failed: " + got.error
                        : compare(i, want, got);
                if (failure != null) {
                    out.println("FAILED: " + failure);
                    return -1;
                }
                tokens += want.tokens;
                out.printf(Locale.ROOT, "request %d: %d prompt tokens, %d tokens equal: %s%n", i, prompts.get(i).length,
                        want.tokens, ModelDemo.printable(want.text));
            }
        }
        out.printf(Locale.ROOT, "%.1f s%n", (System.nanoTime() - t0) / 1e9);
        Map<String, Object> dStatus = ProcessDemo.status(dUrl);
        out.printf(Locale.ROOT, "D received %s bytes of KV; %s requests ok, %s failed%n",
                dStatus.get("kv_bytes_received"), dStatus.get("requests_ok"), dStatus.get("requests_failed"));
        return tokens;
    }

    /** Null when equal; else what differs first. */
    static String compare(int i, Answer want, Answer got) {
        if (!want.text.equals(got.text)) {
            int at = 0;
            while (at < want.text.length() && at < got.text.length() && want.text.charAt(at) == got.text.charAt(at)) {
                at++;
            }
            return String.format(Locale.ROOT, "request %d differs at character %d: single node %s, P/D %s", i, at,
                    ModelDemo.printable(want.text.substring(at)), ModelDemo.printable(got.text.substring(at)));
        }
        if (want.tokens != got.tokens) {
            return String.format(Locale.ROOT, "request %d: the same text in %d tokens (single node) and %d (P/D)", i,
                    want.tokens, got.tokens);
        }
        return null;
    }

    /** An answer's text and completion tokens, or why there is none. */
    record Answer(String text, long tokens, String error) {}

    @SuppressWarnings("unchecked")
    private static Answer complete(HttpClient http, String url, Map<String, Object> body, Duration timeout)
            throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url + "/v1/completions"))
                .timeout(timeout).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(body))).build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            return new Answer(null, 0, "HTTP " + r.statusCode() + ": " + r.body());
        }
        Map<String, Object> m = Json.parseObject(r.body());
        List<Object> choices = (List<Object>) m.get("choices");
        Map<String, Object> usage = (Map<String, Object>) m.get("usage");
        if (choices == null || choices.isEmpty() || usage == null) {
            return new Answer(null, 0, "no choices or usage in " + r.body());
        }
        Object text = ((Map<String, Object>) choices.getFirst()).get("text");
        return new Answer(String.valueOf(text), ((Number) usage.get("completion_tokens")).longValue(), null);
    }

    private static List<Integer> toList(int[] a) {
        List<Integer> l = new ArrayList<>(a.length);
        for (int v : a) {
            l.add(v);
        }
        return l;
    }

    private static ProcessDemo.Child serve(List<ProcessDemo.Child> children, List<String> jvm, String name, String role,
            ModelDemo.Options o, int blocks, Path dir) throws IOException {
        String extra = o.layerwise() && role.equals("kv_producer")
                ? "{\"mooncake_protocol\":\"tcp\",\"layerwise_push\":true}" : "{\"mooncake_protocol\":\"tcp\"}";
        String config = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"" + role
                + "\",\"kv_connector_extra_config\":" + extra + "}";
        ProcessDemo.Child c = new ProcessDemo.Child(name, ProcessDemo.concat(jvm, "serve", "--model",
                o.dir().toAbsolutePath().toString(), "--dtype", o.dtype(), "--host", "127.0.0.1", "--port", "0",
                "--num-gpu-blocks", Integer.toString(blocks), "--drain-timeout", "10", "--kv-transfer-config", config),
                List.of("VLLM_MOONCAKE_BOOTSTRAP_PORT=0", "VLLM_HOST_IP=127.0.0.1",
                        "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=" + Math.max(30, o.timeout().toSeconds())),
                ProcessDemo.SERVE_READY, dir);
        children.add(c);
        return c;
    }
}
