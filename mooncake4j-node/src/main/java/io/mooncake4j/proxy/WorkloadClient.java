package io.mooncake4j.proxy;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A load generator for a disaggregated deployment: sends a mixed workload (completions and chat, streamed
 * and not, several prompt lengths, prompts sharing prefixes) through a proxy and checks every completion
 * against what a {@code kv_both} reference node (no transfer) answers for the same request. Optionally runs
 * a command (e.g. killing a P) after a number of completions, and then tells apart the requests that fail
 * cleanly because of it ("failed as expected": an OpenAI-style error, or an SSE error event, for a request
 * that was in flight at the kill or that names the killed node) from wrong ones (a completion that differs
 * from the reference, a stream that ends without {@code [DONE]} or an error, any other failure).
 *
 * <p>Used by {@code scripts/multihost.sh} (as a {@code main}) and {@code bin/mooncake4j demo --processes}.
 * Thread-safe: requests run on virtual threads, at most {@link Options#concurrency()} at once.
 */
public final class WorkloadClient implements AutoCloseable {

    /**
     * What to send.
     *
     * @param proxy          base URL of the proxy
     * @param reference      base URL of the {@code kv_both} reference node (null: no check, counts only)
     * @param model          the {@code model} field, or null to leave it out
     * @param requests       requests to send
     * @param concurrency    requests in flight at once
     * @param promptLengths  prompt lengths in tokens, used in turn
     * @param prefixGroups   distinct shared prefixes (0: every prompt unique)
     * @param sharedPrefix   tokens of the shared prefix (capped at half the prompt)
     * @param maxTokens      completion lengths, used in turn
     * @param streamEvery    every k-th request streams (0: none, 1: all)
     * @param chatEvery      every k-th request is a chat completion (0: none)
     * @param seed           workload seed
     * @param killAt         after this many finished requests run {@code killCommand} (0: never)
     * @param killCommand    a {@code sh -c} command line
     * @param killedName     the killed node's URL: a failure the proxy blames on it ({@code error.failed_node}) after
     *                       the kill is expected
     * @param timeout        bound on the whole run
     * @param kvBytesPerToken KV bytes of one prompt token on the P side (for the KV rate; 0: not shown)
     */
    public record Options(URI proxy, URI reference, String model, int requests, int concurrency, int[] promptLengths,
            int prefixGroups, int sharedPrefix, int[] maxTokens, int streamEvery, int chatEvery, long seed, int killAt,
            String killCommand, String killedName, Duration timeout, long kvBytesPerToken) {
        public Options {
            Objects.requireNonNull(proxy, "proxy");
            if (requests <= 0 || concurrency <= 0 || promptLengths.length == 0 || maxTokens.length == 0) {
                throw new IllegalArgumentException("requests, concurrency, prompt lengths and max tokens must be given");
            }
        }
    }

    /** One request of the workload. */
    record Item(int index, boolean chat, boolean stream, int[] prompt, String text, int maxTokens) {
        Map<String, Object> body(String model, boolean streamIt) {
            Map<String, Object> m = new LinkedHashMap<>();
            if (model != null) {
                m.put("model", model);
            }
            if (chat) {
                m.put("messages", List.of(Map.of("role", "user", "content", text)));
                m.put("max_completion_tokens", maxTokens);
            } else {
                List<Object> ids = new ArrayList<>(prompt.length);
                for (int t : prompt) {
                    ids.add((long) t);
                }
                m.put("prompt", ids);
                m.put("max_tokens", maxTokens);
            }
            m.put("temperature", 0);
            m.put("stream", streamIt);
            if (streamIt) {
                m.put("stream_options", Map.of("include_usage", true));
            }
            return m;
        }

        String key() {
            return (chat ? "chat:" + text : "ids:" + Arrays.hashCode(prompt) + ":" + prompt.length) + ":" + maxTokens;
        }

        int promptTokens() {
            return chat ? text.length() : prompt.length;
        }
    }

    /** What one request came back with. */
    /**
     * One request's result; {@code failedNode} is the node the proxy blamed for a failure (its
     * {@code error.failed_node}), or null.
     */
    record Outcome(int status, String text, String error, long ttftNanos, long latencyNanos, String failedNode) {

        Outcome(int status, String text, String error, long ttftNanos, long latencyNanos) {
            this(status, text, error, ttftNanos, latencyNanos, null);
        }
    }

    /** The counts and figures of a run. */
    public record Report(int ok, int failedAsExpected, int wrong, int unchecked, double seconds, long[] ttftNanos,
            long[] latencyNanos, long promptTokens, long kvBytes, List<String> problems) {

        public double requestsPerSecond() {
            return (ok + failedAsExpected + wrong + unchecked) / seconds;
        }

        public double ttftMillis(double q) {
            return percentile(ttftNanos, q) / 1e6;
        }

        public double latencyMillis(double q) {
            return percentile(latencyNanos, q) / 1e6;
        }

        public double kvGibPerSecond() {
            return kvBytes / seconds / (1L << 30);
        }

        private static double percentile(long[] v, double q) {
            if (v.length == 0) {
                return Double.NaN;
            }
            long[] s = v.clone();
            Arrays.sort(s);
            return s[(int) Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
        }

        public void print(PrintStream out, String label) {
            for (String p : problems) {
                out.println("  " + p);
            }
            out.printf(Locale.ROOT, "  %-28s %d%n", "requests", ok + failedAsExpected + wrong + unchecked);
            out.printf(Locale.ROOT, "  %-28s %d%n", "ok (== kv_both reference)", ok);
            out.printf(Locale.ROOT, "  %-28s %d%n", "failed as expected", failedAsExpected);
            out.printf(Locale.ROOT, "  %-28s %d%n", "wrong", wrong);
            if (unchecked > 0) {
                out.printf(Locale.ROOT, "  %-28s %d%n", "answered, not checked", unchecked);
            }
            out.printf(Locale.ROOT, "  %-28s %.2f s%n", "wall time", seconds);
            out.printf(Locale.ROOT, "  %-28s %.1f%n", "requests/s", requestsPerSecond());
            out.printf(Locale.ROOT, "  %-28s p50 %.1f ms, p99 %.1f ms (%d streamed)%n", "TTFT at client",
                    ttftMillis(0.5), ttftMillis(0.99), ttftNanos.length);
            out.printf(Locale.ROOT, "  %-28s p50 %.1f ms, p99 %.1f ms%n", "latency", latencyMillis(0.5),
                    latencyMillis(0.99));
            if (kvBytes > 0) {
                out.printf(Locale.ROOT, "  %-28s %.2f GiB/s (%d prompt tokens)%n", "prompt KV rate", kvGibPerSecond(),
                        promptTokens);
            }
            out.printf(Locale.ROOT, "%s: %d ok, %d failed-as-expected, %d wrong%n", label, ok, failedAsExpected, wrong);
        }
    }

    private final Options o;
    private final Http1Client http;
    private final ExecutorService exec;
    private final Map<String, CompletableFuture<Outcome>> references = new ConcurrentHashMap<>();

    public WorkloadClient(Options options) {
        this.o = options;
        this.exec = Executors.newThreadPerTaskExecutor(Thread.ofVirtual().name("mooncake-workload-", 0).factory());
        this.http = new Http1Client(Http1Client.Limits.defaults(Duration.ofSeconds(10)),
                Thread.ofVirtual().name("mooncake-workload-http-", 0).factory());
    }

    /** The workload's requests (deterministic in the seed). */
    List<Item> items() {
        Random r = new Random(o.seed());
        int groups = Math.max(0, o.prefixGroups());
        int maxLen = Arrays.stream(o.promptLengths()).max().orElse(1);
        int[][] prefixes = new int[groups][];
        for (int g = 0; g < groups; g++) {
            prefixes[g] = new int[Math.min(o.sharedPrefix(), maxLen)];
            for (int i = 0; i < prefixes[g].length; i++) {
                prefixes[g][i] = r.nextInt(32_000);
            }
        }
        List<Item> out = new ArrayList<>();
        for (int i = 0; i < o.requests(); i++) {
            int len = o.promptLengths()[i % o.promptLengths().length];
            int maxTokens = o.maxTokens()[(i / o.promptLengths().length) % o.maxTokens().length];
            boolean stream = o.streamEvery() > 0 && i % o.streamEvery() == 0;
            boolean chat = o.chatEvery() > 0 && i % o.chatEvery() == o.chatEvery() - 1;
            if (chat) {
                StringBuilder sb = new StringBuilder();
                if (groups > 0) {
                    sb.append("shared context ").append(i % groups).append(": ")
                            .append("lorem ipsum dolor sit amet ".repeat(Math.max(1, Math.min(o.sharedPrefix(), len / 2) / 27)));
                }
                while (sb.length() < len) {
                    sb.append((char) ('a' + r.nextInt(26)));
                    if (r.nextInt(6) == 0) {
                        sb.append(' ');
                    }
                }
                out.add(new Item(i, true, stream, null, sb.substring(0, len), maxTokens));
            } else {
                int[] p = new int[len];
                int shared = 0;
                if (groups > 0) {
                    int[] pre = prefixes[i % groups];
                    shared = Math.min(pre.length, len / 2);
                    System.arraycopy(pre, 0, p, 0, shared);
                }
                for (int k = shared; k < len; k++) {
                    p[k] = r.nextInt(32_000);
                }
                out.add(new Item(i, false, stream, p, null, maxTokens));
            }
        }
        return out;
    }

    /** Sends the workload; returns its report. */
    public Report run() throws InterruptedException {
        return run(null);
    }

    /**
     * Sends the workload; returns its report.
     *
     * @param onTimedStart called (on this thread) after the reference answers, just before the timed run
     *                     through the proxy starts; may be null
     */
    public Report run(Runnable onTimedStart) throws InterruptedException {
        List<Item> items = items();
        long deadline = System.nanoTime() + o.timeout().toNanos();
        if (o.reference() != null) {
            // The reference answers first, so that the timed run through the proxy has the machine to itself.
            Semaphore refSlots = new Semaphore(o.concurrency());
            List<CompletableFuture<Void>> refs = new ArrayList<>();
            for (Item it : items) {
                refSlots.acquire();
                refs.add(CompletableFuture.runAsync(() -> {
                    try {
                        reference(it, deadline);
                    } finally {
                        refSlots.release();
                    }
                }, exec));
            }
            CompletableFuture.allOf(refs.toArray(CompletableFuture[]::new)).join();
        }
        Semaphore slots = new Semaphore(o.concurrency());
        AtomicInteger finished = new AtomicInteger();
        AtomicLong killedAt = new AtomicLong(0);
        Set<Integer> inFlight = ConcurrentHashMap.newKeySet();
        Set<Integer> inFlightAtKill = ConcurrentHashMap.newKeySet();
        Outcome[] outcomes = new Outcome[items.size()];
        boolean[] startedAfterKill = new boolean[items.size()];
        List<String> problems = java.util.Collections.synchronizedList(new ArrayList<>());
        List<CompletableFuture<Void>> all = new ArrayList<>();
        Object killLock = new Object();
        if (onTimedStart != null) {
            onTimedStart.run();
        }
        long start = System.nanoTime();
        for (Item it : items) {
            if (!slots.tryAcquire(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                problems.add("run timed out before request " + it.index() + " was sent");
                break;
            }
            synchronized (killLock) {
                inFlight.add(it.index());
                startedAfterKill[it.index()] = killedAt.get() != 0;
            }
            all.add(CompletableFuture.runAsync(() -> {
                try {
                    outcomes[it.index()] = send(o.proxy(), it, it.stream(), deadline);
                } finally {
                    inFlight.remove(it.index());
                    slots.release();
                    int n = finished.incrementAndGet();
                    if (o.killAt() > 0 && n == o.killAt()) {
                        synchronized (killLock) {
                            inFlightAtKill.addAll(inFlight);
                            killedAt.set(System.nanoTime());
                        }
                        runKill(problems);
                    }
                }
            }, exec));
        }
        try {
            CompletableFuture.allOf(all.toArray(CompletableFuture[]::new))
                    .get(Math.max(1, deadline - System.nanoTime() + TimeUnit.SECONDS.toNanos(5)), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            problems.add("not every request finished in time: " + e);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        int ok = 0;
        int expected = 0;
        int wrong = 0;
        int unchecked = 0;
        List<Long> ttft = new ArrayList<>();
        List<Long> lat = new ArrayList<>();
        long promptTokens = 0;
        for (Item it : items) {
            Outcome out = outcomes[it.index()];
            if (out == null) {
                wrong++;
                problems.add("request " + it.index() + ": no answer");
                continue;
            }
            lat.add(out.latencyNanos());
            if (out.ttftNanos() > 0) {
                ttft.add(out.ttftNanos());
            }
            if (out.error() != null) {
                boolean afterKill = inFlightAtKill.contains(it.index()) || startedAfterKill[it.index()];
                // the cause as the proxy reports it (error.failed_node), not words of its message
                boolean named = o.killedName() != null
                        && o.killedName().replaceAll("/$", "").equals(out.failedNode());
                if (killedAt.get() != 0 && (inFlightAtKill.contains(it.index()) || (afterKill && named))) {
                    expected++;
                    if (expected <= 3) {
                        problems.add(String.format(Locale.ROOT, "request %d failed as expected: %d %s", it.index(),
                                out.status(), abbreviate(out.error())));
                    }
                } else {
                    wrong++;
                    problems.add(String.format(Locale.ROOT, "request %d (%s%s, %d tokens) failed unexpectedly: %d %s",
                            it.index(), it.chat() ? "chat" : "completion", it.stream() ? ", stream" : "",
                            it.promptTokens(), out.status(), out.error()));
                }
                continue;
            }
            promptTokens += it.promptTokens();
            if (o.reference() == null) {
                unchecked++;
                continue;
            }
            Outcome ref = reference(it, deadline);
            if (ref.error() != null) {
                wrong++;
                problems.add("request " + it.index() + ": the reference node failed: " + ref.error());
            } else if (!ref.text().equals(out.text())) {
                wrong++;
                problems.add(String.format(Locale.ROOT, "request %d (%s%s): WRONG completion %s, reference %s",
                        it.index(), it.chat() ? "chat" : "completion", it.stream() ? ", stream" : "",
                        abbreviate(out.text()), abbreviate(ref.text())));
            } else {
                ok++;
            }
        }
        return new Report(ok, expected, wrong, unchecked, seconds, ttft.stream().mapToLong(Long::longValue).toArray(),
                lat.stream().mapToLong(Long::longValue).toArray(), promptTokens, promptTokens * o.kvBytesPerToken(),
                List.copyOf(problems));
    }

    private void runKill(List<String> problems) {
        if (o.killCommand() == null) {
            return;
        }
        try {
            Process p = new ProcessBuilder("sh", "-c", o.killCommand()).inheritIO().start();
            if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
                problems.add("the kill command '" + o.killCommand() + "' failed");
            }
        } catch (IOException e) {
            problems.add("cannot run the kill command: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Outcome reference(Item it, long deadline) {
        return references.computeIfAbsent(it.key(), k -> CompletableFuture.supplyAsync(
                () -> send(o.reference(), it, false, deadline), exec)).join();
    }

    /** Sends one request and reads its answer (never throws: failures become an outcome with an error). */
    Outcome send(URI base, Item it, boolean stream, long deadline) {
        long t0 = System.nanoTime();
        String path = it.chat() ? "/v1/chat/completions" : "/v1/completions";
        try {
            Http1Client.Request req = Http1Client.Request.post(base.resolve(path), Map.of("Content-Type",
                    "application/json"), Json.write(it.body(o.model(), stream)).getBytes(StandardCharsets.UTF_8),
                    Duration.ofNanos(Math.max(1, deadline - t0)));
            Http1Client.Response r = http.send(req);
            // A stream is read as server-sent events whatever its Content-Type: vLLM's example proxy labels
            // the events it passes through application/json.
            if (r.statusCode() != 200 || !stream) {
                String body;
                try (InputStream in = r.body()) {
                    body = new String(in.readNBytes(64 << 20), StandardCharsets.UTF_8);
                }
                long lat = System.nanoTime() - t0;
                if (r.statusCode() != 200) {
                    return new Outcome(r.statusCode(), null, errorText(body, r.statusCode()), 0, lat,
                            failedNode(body));
                }
                return new Outcome(200, completionText(Json.parseObject(body), it.chat()), null, 0, lat);
            }
            StringBuilder text = new StringBuilder();
            long ttft = 0;
            boolean done = false;
            try (BoundedLines in = new BoundedLines(r.body())) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.startsWith("data: ")) {
                        if (!line.isBlank() && !line.startsWith(":") && !line.startsWith("event:")
                                && !line.startsWith("id:") && !line.startsWith("retry:")) {
                            return new Outcome(200, "<not a server-sent event: " + abbreviate(line) + ">", null, ttft,
                                    System.nanoTime() - t0);
                        }
                        continue;
                    }
                    String data = line.substring(6).trim();
                    if (data.equals("[DONE]")) {
                        done = true;
                        // read to the stream's end (the server ends it here) so that the connection is reused
                        for (int extra = 0; extra < 16 && in.readLine() != null; extra++) {
                            // nothing follows [DONE] in an OpenAI stream but blank lines
                        }
                        break;
                    }
                    Map<String, Object> ev = Json.parseObject(data);
                    if (ev.get("error") != null) {
                        return new Outcome(200, null, "stream error event: " + errorText(data, 200), 0,
                                System.nanoTime() - t0, failedNode(data));
                    }
                    String piece = chunkText(ev, it.chat());
                    if (!piece.isEmpty() && ttft == 0) {
                        ttft = System.nanoTime() - t0;
                    }
                    text.append(piece);
                }
            }
            long lat = System.nanoTime() - t0;
            if (!done) {
                // Not a clean failure: a stream that stops without [DONE] or an error event is wrong.
                return new Outcome(200, "<stream ended without [DONE] after '" + text + "'>", null, ttft, lat);
            }
            return new Outcome(200, text.toString(), null, ttft, lat);
        } catch (IOException | JsonException | ClassCastException | NullPointerException e) {
            return new Outcome(0, null, "transport: " + e, 0, System.nanoTime() - t0);
        }
    }

    /** Longest server-sent-event line read from a stream (one event's {@code data:} line). */
    static final int MAX_STREAM_LINE_CHARS = 1 << 20;
    /** Most characters read from one stream, as for a non-streamed body. */
    static final long MAX_STREAM_CHARS = 64L << 20;

    /**
     * A stream's lines, each at most {@link #MAX_STREAM_LINE_CHARS} and all together at most
     * {@link #MAX_STREAM_CHARS} characters: a server that never ends a line, or never ends its stream,
     * gets an {@link IOException}, not the client's memory. A line ends at {@code \n}; a {@code \r}
     * before it is dropped.
     */
    static final class BoundedLines implements AutoCloseable {
        private final BufferedReader in;
        private long total;

        BoundedLines(InputStream body) {
            this.in = new BufferedReader(new InputStreamReader(body, StandardCharsets.UTF_8));
        }

        /** The next line, or null at the end of the stream. */
        String readLine() throws IOException {
            StringBuilder b = new StringBuilder();
            while (true) {
                int c = in.read();
                if (c < 0) {
                    return b.isEmpty() ? null : b.toString();
                }
                if (++total > MAX_STREAM_CHARS) {
                    throw new IOException("the stream is longer than " + MAX_STREAM_CHARS + " characters");
                }
                if (c == '\n') {
                    int n = b.length();
                    if (n > 0 && b.charAt(n - 1) == '\r') {
                        b.setLength(n - 1);
                    }
                    return b.toString();
                }
                if (b.length() >= MAX_STREAM_LINE_CHARS) {
                    throw new IOException("a stream line is longer than " + MAX_STREAM_LINE_CHARS + " characters");
                }
                b.append((char) c);
            }
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }

    /** The proxy's {@code error.failed_node} in an error answer (without a trailing slash), or null. */
    static String failedNode(String body) {
        try {
            Map<String, Object> m = Json.parseObject(body);
            if (m.get("error") instanceof Map<?, ?> e && e.get("failed_node") instanceof String s) {
                return s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
            }
        } catch (JsonException ignored) {
            // not JSON: no structured cause
        }
        return null;
    }

    private static String errorText(String body, int status) {
        try {
            Map<String, Object> m = Json.parseObject(body);
            if (m.get("error") instanceof Map<?, ?> e && e.get("message") instanceof String s) {
                return status + " " + s;
            }
        } catch (JsonException ignored) {
            // not JSON: not an OpenAI-style error
        }
        return "NOT an OpenAI-style error (" + status + "): " + abbreviate(body);
    }

    @SuppressWarnings("unchecked")
    private static String completionText(Map<String, Object> body, boolean chat) {
        Map<String, Object> c = (Map<String, Object>) ((List<Object>) body.get("choices")).get(0);
        if (chat) {
            return (String) ((Map<String, Object>) c.get("message")).get("content");
        }
        return (String) c.get("text");
    }

    @SuppressWarnings("unchecked")
    private static String chunkText(Map<String, Object> ev, boolean chat) {
        List<Object> choices = (List<Object>) ev.get("choices");
        if (choices == null || choices.isEmpty()) {
            return "";
        }
        Map<String, Object> c = (Map<String, Object>) choices.get(0);
        Object v;
        if (chat) {
            Map<String, Object> delta = (Map<String, Object>) c.get("delta");
            v = delta == null ? null : delta.get("content");
        } else {
            v = c.get("text");
        }
        return v == null ? "" : (String) v;
    }

    private static String abbreviate(String s) {
        return s == null ? "null" : s.length() <= 200 ? "'" + s + "'" : "'" + s.substring(0, 197) + "...'";
    }

    /** Polls each node's {@code /mooncake/status} until nothing is in flight or held; returns what is left. */
    public List<String> awaitDrained(List<URI> nodes, Duration timeout) throws InterruptedException {
        List<String> left = new ArrayList<>();
        long end = System.nanoTime() + timeout.toNanos();
        for (URI n : nodes) {
            String last = "no answer";
            boolean drained = false;
            while (System.nanoTime() < end) {
                try {
                    int status;
                    String body;
                    try (Http1Client.Response r = http.send(Http1Client.Request.get(n.resolve("/mooncake/status"),
                            Duration.ofSeconds(5)))) {
                        status = r.statusCode();
                        body = r.bodyString(1 << 20);
                    }
                    Map<String, Object> s = Json.parseObject(body);
                    last = body;
                    if (status == 200 && num(s, "in_flight") == 0 && num(s, "holding_kv_for_decode") == 0
                            && num(s, "running") == 0 && num(s, "waiting") == 0
                            && num(s, "free_blocks") == num(s, "num_blocks")) {
                        drained = true;
                        break;
                    }
                } catch (IOException | JsonException e) {
                    last = e.toString();
                }
                TimeUnit.MILLISECONDS.sleep(200); // polling a remote node's counters, not synchronising threads
            }
            if (!drained) {
                left.add(n + " did not free everything: " + last);
            }
        }
        return left;
    }

    private static long num(Map<String, Object> m, String k) {
        return m.get(k) instanceof Number x ? x.longValue() : -1;
    }

    @Override
    public void close() {
        http.close();
        exec.close();
    }

    /**
     * {@code java ... io.mooncake4j.proxy.WorkloadClient --proxy URL [--reference URL] [--requests N] ...}:
     * runs a workload, prints the report, and exits 0 only when nothing was wrong (and every node of
     * {@code --drained URL,URL} freed everything).
     */
    public static void main(String[] args) throws Exception {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                System.err.println("WorkloadClient: flags are --name value, got '" + args[i] + "'");
                System.exit(2);
            }
            a.put(args[i].substring(2), args[++i]);
        }
        Set<String> knownFlags = Set.of("proxy", "reference", "model", "requests", "concurrency", "prompt-lengths",
                "prefix-groups", "shared-prefix", "max-tokens", "stream-every", "chat-every", "seed", "kill-at",
                "kill-cmd", "killed-name", "timeout", "kv-bytes-per-token", "drained", "label", "drain-timeout");
        for (String k : a.keySet()) {
            if (!knownFlags.contains(k)) {
                System.err.println("WorkloadClient: unknown flag --" + k + " (known: " + knownFlags + ")");
                System.exit(2);
            }
        }
        if (!a.containsKey("proxy")) {
            System.err.println("WorkloadClient: --proxy URL is required");
            System.exit(2);
        }
        Options o = new Options(URI.create(a.get("proxy")), a.containsKey("reference") ? URI.create(a.get("reference"))
                : null, a.get("model"), Integer.parseInt(a.getOrDefault("requests", "300")),
                Integer.parseInt(a.getOrDefault("concurrency", "16")), ints(a.getOrDefault("prompt-lengths", "64,500,2000")),
                Integer.parseInt(a.getOrDefault("prefix-groups", "4")), Integer.parseInt(a.getOrDefault("shared-prefix", "256")),
                ints(a.getOrDefault("max-tokens", "4,16")), Integer.parseInt(a.getOrDefault("stream-every", "2")),
                Integer.parseInt(a.getOrDefault("chat-every", "5")), Long.parseLong(a.getOrDefault("seed", "42")),
                Integer.parseInt(a.getOrDefault("kill-at", "0")), a.get("kill-cmd"), a.get("killed-name"),
                Duration.ofSeconds(Long.parseLong(a.getOrDefault("timeout", "300"))),
                Long.parseLong(a.getOrDefault("kv-bytes-per-token", "0")));
        WorkloadClient c = new WorkloadClient(o);
        int rc;
        try {
            Report r = c.run();
            List<String> left = List.of();
            if (a.containsKey("drained")) {
                List<URI> nodes = Arrays.stream(a.get("drained").split(",")).filter(s -> !s.isBlank()).map(URI::create)
                        .toList();
                left = c.awaitDrained(nodes, Duration.ofSeconds(Long.parseLong(a.getOrDefault("drain-timeout", "60"))));
                for (String l : left) {
                    System.out.println("  " + l);
                }
                if (left.isEmpty()) {
                    System.out.println("  every surviving node freed all its blocks: " + nodes);
                }
            }
            r.print(System.out, a.getOrDefault("label", "workload"));
            rc = r.wrong() == 0 && left.isEmpty() && r.ok() > 0 ? 0 : 1;
        } finally {
            c.close();
        }
        System.exit(rc);
    }

    private static int[] ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::trim).mapToInt(Integer::parseInt).toArray();
    }
}
