package io.mooncake4j.model;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimProxy;
import io.mooncake4j.sim.SimResult;

import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * {@code bin/mooncake4j demo --model DIR}: N requests through a P and a D engine (in this JVM, the
 * real connector, a transfer engine on loopback) and through one {@code kv_both} engine, every
 * generated token compared, one verdict line at the end.
 *
 * <p>Prompts are random token ids (a beginning-of-sequence token first where the tokenizer adds one) of
 * lengths that end inside and on block boundaries; every second request extends the previous one's prompt, so D also serves
 * prefixes from its own cache. Greedy decoding.
 *
 * <p>Single-threaded use: {@link #run} blocks until every request finished or timed out.
 */
public final class ModelDemo {

    /**
     * @param dir       the model directory
     * @param dtype     the working dtype, F32 or BF16
     * @param requests  requests to run
     * @param decode    tokens to generate per request
     * @param protocol  the transfer engine ({@code tcp}, ...)
     * @param seed      the prompts' seed
     * @param timeout   per request
     * @param layerwise P pushes each layer's KV while the next computes ({@code layerwise_push})
     */
    public record Options(Path dir, String dtype, int requests, int decode, String protocol, long seed,
                          Duration timeout, boolean layerwise) {
        public Options {
            if (requests <= 0 || decode <= 0) {
                throw new IllegalArgumentException("requests and decode tokens must be positive");
            }
        }

        /** Whole-request push (no layer-wise push). */
        public Options(Path dir, String dtype, int requests, int decode, String protocol, long seed, Duration timeout) {
            this(dir, dtype, requests, decode, protocol, seed, timeout, false);
        }
    }

    private static final int BLOCK = 16;

    private ModelDemo() {}

    /** Runs the demo; returns the exit code (0: every token equal). */
    public static int run(Options o, PrintStream out) throws Exception {
        try (JlamaModel model = JlamaModel.load(o.dir(), o.dtype());
             MooncakeBootstrapServer pdBootstrap = new MooncakeBootstrapServer("127.0.0.1", 0);
             MooncakeBootstrapServer bothBootstrap = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            pdBootstrap.start();
            bothBootstrap.start();
            int maxPrompt = maxPrompt(model, o.decode());
            int blocks = 2 * ((maxPrompt + o.decode()) / BLOCK + 2) + 8;
            // the shm transport maps the peer's KV memory: memfd-backed caches
            SimEngine.KvPlacement place = o.protocol().equals("shm") || o.protocol().equals("auto")
                    ? SimEngine.KvPlacement.sharedHost() : SimEngine.KvPlacement.host();
            var base = MooncakeConnectorConfig.builder().protocol(o.protocol()).hostname("127.0.0.1").numWorkers(2)
                    .abortRequestTimeout(o.timeout());
            String pd = "127.0.0.1:" + pdBootstrap.port();
            out.printf(Locale.ROOT, "model %s (%s), %d requests x %d tokens, P->D over %s%s%n", o.dir(),
                    model.kvLayout(), o.requests(), o.decode(), o.protocol(), o.layerwise() ? ", layer-wise push" : "");
            try (SimEngine p = SimEngine.start(base.bootstrapServerAddress(pd).kvRole(KvRole.KV_PRODUCER)
                            .engineId("demo-p").tp(0, 1).layerwisePush(o.layerwise()).build(),
                            new JlamaStepModel(model), BLOCK, blocks,
                            SimEngine.Limits.defaults(), ConnectorSimWorker.factory(o.protocol()), place);
                 SimEngine d = SimEngine.start(base.bootstrapServerAddress(pd).kvRole(KvRole.KV_CONSUMER)
                            .engineId("demo-d").tp(0, 1).build(), new JlamaStepModel(model), BLOCK, blocks,
                            SimEngine.Limits.defaults(), ConnectorSimWorker.factory(o.protocol()), place);
                 SimEngine both = SimEngine.start(base.bootstrapServerAddress("127.0.0.1:" + bothBootstrap.port())
                            .kvRole(KvRole.KV_BOTH).engineId("demo-both").tp(0, 1).build(), new JlamaStepModel(model),
                            BLOCK, blocks, SimEngine.Limits.defaults(), ConnectorSimWorker.factory(o.protocol()),
                            place)) {
                String url = "http://" + pd;
                SimProxy proxy = new SimProxy(p, d, url, SimProxy.resolveEngineId(url, 0));
                List<int[]> prompts = prompts(model, o.requests(), o.decode(), o.seed());
                long tokens = 0;
                long hits = 0;
                long t0 = System.nanoTime();
                for (int i = 0; i < o.requests(); i++) {
                    int[] prompt = prompts.get(i);
                    long s = o.timeout().toNanos();
                    SimResult single = both.submit("single-" + i, prompt, o.decode(), null)
                            .get(s, TimeUnit.NANOSECONDS);
                    SimProxy.Exchange x = proxy.submit("req-" + i, prompt, o.decode()).get(s, TimeUnit.NANOSECONDS);
                    String failure = compare(i, single, x);
                    if (failure != null) {
                        out.println("FAILED: " + failure);
                        return 1;
                    }
                    tokens += single.outputTokens().length;
                    hits += x.decode().localHitTokens();
                    out.printf(Locale.ROOT, "request %d: %d prompt tokens (%d from D's prefix cache), %d tokens equal: %s%n",
                            i, prompt.length, x.decode().localHitTokens(), single.outputTokens().length,
                            printable(model.decode(single.outputTokens(), single.outputTokens().length)));
                }
                out.printf(Locale.ROOT, "%.1f s, %d prompt tokens served from D's prefix cache%n",
                        (System.nanoTime() - t0) / 1e9, hits);
                out.printf(Locale.ROOT, "OK: disaggregated tokens equal single-node tokens (%d requests, %d tokens)%n",
                        o.requests(), tokens);
                return 0;
            }
        }
    }

    /** The longest prompt the demo sends: at most 160 tokens, and room for {@code decode} more. */
    private static int maxPrompt(JlamaModel model, int decode) {
        int maxPrompt = Math.min(160, model.contextLength() - decode);
        if (maxPrompt < 8) {
            throw new IllegalArgumentException("the model's context of " + model.contextLength()
                    + " tokens leaves no room for prompts and " + decode + " output tokens");
        }
        return maxPrompt;
    }

    /**
     * The demo's prompts: random token ids (after a beginning-of-sequence token where the tokenizer adds
     * one), lengths ending inside and
     * on block boundaries; every second one extends the one before (a prefix D has in its cache).
     */
    public static List<int[]> prompts(JlamaModel model, int requests, int decode, long seed) {
        int max = maxPrompt(model, decode);
        SplittableRandom rnd = new SplittableRandom(seed);
        List<int[]> out = new ArrayList<>(requests);
        int[] previous = null;
        for (int i = 0; i < requests; i++) {
            previous = prompt(rnd, model, max, i % 2 == 1 ? previous : null);
            out.add(previous);
        }
        return out;
    }

    /** Null when equal; else what differs first. */
    static String compare(int i, SimResult single, SimProxy.Exchange x) {
        if (!single.ok()) {
            return String.format(Locale.ROOT, "request %d: the single node failed: %s", i, single.error());
        }
        if (!x.decode().ok() || !x.prefill().ok()) {
            return String.format(Locale.ROOT, "request %d: the P/D pair failed: P %s, D %s", i, x.prefill().error(),
                    x.decode().error());
        }
        int[] a = single.outputTokens();
        int[] b = x.decode().outputTokens();
        int at = Arrays.mismatch(a, b);
        if (at >= 0) {
            return String.format(Locale.ROOT, "request %d differs at output position %d: single node %s, D %s", i, at,
                    at < a.length ? Integer.toString(a[at]) : "(ended)", at < b.length ? Integer.toString(b[at]) : "(ended)");
        }
        return null;
    }

    private static int[] prompt(SplittableRandom rnd, JlamaModel model, int max, int[] extend) {
        int n = 5 + rnd.nextInt(max - 4);
        if (extend != null && extend.length + 5 <= max) {
            n = extend.length + 5 + rnd.nextInt(max - extend.length - 4); // the previous prompt and more
        }
        if (rnd.nextInt(3) == 0) {
            n = Math.max(BLOCK, n / BLOCK * BLOCK); // on a block boundary
        }
        int[] t = new int[n];
        int keep = 0;
        if (extend != null && extend.length < n) {
            keep = extend.length;
            System.arraycopy(extend, 0, t, 0, keep);
        }
        int[] start = model.encode(""); // the beginning-of-sequence token, where the tokenizer adds one (not Qwen2)
        for (int i = keep; i < n; i++) {
            t[i] = i == 0 && start.length > 0 ? start[0] : 3 + rnd.nextInt(model.vocabularySize() - 3);
        }
        return t;
    }

    /** The text on one line, at most 60 characters and an ellipsis, quoted. */
    public static String printable(String s) {
        String one = s.replace("\n", "\\n");
        return "\"" + (one.length() > 60 ? one.substring(0, 60) + "..." : one) + "\"";
    }
}
