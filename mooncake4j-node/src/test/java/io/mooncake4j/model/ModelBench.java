package io.mooncake4j.model;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimProxy;
import io.mooncake4j.sim.SimResult;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Prefill, TTFT and decode of a Jlama model on one node and through a P/D pair (not a test; run by
 * {@code scripts/model-bench.sh}, optionally over an emulated link with {@code scripts/model-link.sh}).
 * In one JVM: a {@code kv_both} engine (the single node), a P engine pushing whole requests, a P engine
 * pushing layer by layer ({@code layerwise_push}) and a D engine, all over the TCP transfer engine on
 * 127.0.0.1, the weights loaded once. Each round runs, one after the other (nothing overlaps another
 * configuration), in an order rotating by round: the single node, the pair with whole-request push, the
 * pair with layer-wise push; the first round warms up and is not counted; the medians of the rest are
 * printed, and, within each pair request, TTFT at D less P's prefill (what disaggregation adds).
 *
 * <ul>
 *   <li>single node: prefill time = submit → first token; decode tokens/s over the tokens after the first;</li>
 *   <li>pair: P's prefill time = submit → P's token (its prefill tokens/s); TTFT at D = submit → D's first
 *       token (P's prefill, the transfer, D's load and its recompute of the last prompt token); decode
 *       tokens/s at D over its tokens after the first.</li>
 * </ul>
 *
 * <p>Arguments: {@code MODEL_DIR [PROMPT_TOKENS=1024] [DECODE_TOKENS=32] [ROUNDS=4] [DTYPE=F32]}. The
 * header names the link ({@code -Dmodel.link}) and the machine's load.
 */
public final class ModelBench {

    private static final int BLOCK = 16;

    private ModelBench() {}

    /** One run's timestamps: submit, the tokens as they came (ns). */
    private static final class Clock {
        final long start = System.nanoTime();
        final List<Long> tokens = new ArrayList<>();

        void token(int t) {
            tokens.add(System.nanoTime());
        }

        double firstSeconds() {
            return (tokens.getFirst() - start) / 1e9;
        }

        double decodeRate() {
            int n = tokens.size() - 1;
            return n <= 0 ? Double.NaN : n / ((tokens.getLast() - tokens.getFirst()) / 1e9);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: ModelBench MODEL_DIR [PROMPT_TOKENS=1024] [DECODE_TOKENS=32] [ROUNDS=4] [DTYPE=F32]");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        int promptTokens = args.length > 1 ? Integer.parseInt(args[1]) : 1024;
        int decode = args.length > 2 ? Integer.parseInt(args[2]) : 32;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 4;
        String dtype = args.length > 4 ? args[4] : "F32";
        try (JlamaModel model = JlamaModel.load(dir, dtype);
             MooncakeBootstrapServer bsWhole = new MooncakeBootstrapServer("127.0.0.1", 0);
             MooncakeBootstrapServer bsLayer = new MooncakeBootstrapServer("127.0.0.1", 0);
             MooncakeBootstrapServer bsBoth = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            bsWhole.start();
            bsLayer.start();
            bsBoth.start();
            if (promptTokens + decode + 1 > model.contextLength()) {
                throw new IllegalArgumentException("prompt + decode exceed the model's context of " + model.contextLength());
            }
            int blocks = 2 * ((promptTokens + decode + 1) / BLOCK + 2) + 8;
            var base = MooncakeConnectorConfig.builder().protocol("tcp").hostname("127.0.0.1").numWorkers(2)
                    .abortRequestTimeout(Duration.ofSeconds(600));
            System.out.printf(Locale.ROOT, "ModelBench: %s (%s), %d prompt tokens, %d decode tokens, %d rounds "
                    + "(first one warm-up); KV %.1f KiB per token; link: %s; %d CPUs, load average %s%n", dir,
                    model.kvLayout(), promptTokens, decode, rounds,
                    model.kvShape(BLOCK).pageBytes(1) * (double) model.numLayers() / BLOCK / 1024,
                    System.getProperty("model.link", "loopback (no shaping)"), Runtime.getRuntime().availableProcessors(),
                    loadAverage());
            try (SimEngine both = engine(base.bootstrapServerAddress("127.0.0.1:" + bsBoth.port()).kvRole(KvRole.KV_BOTH)
                        .engineId("bench-both").tp(0, 1).build(), model, blocks);
                 SimEngine pWhole = engine(base.bootstrapServerAddress("127.0.0.1:" + bsWhole.port())
                        .kvRole(KvRole.KV_PRODUCER).engineId("bench-p-whole").tp(0, 1).layerwisePush(false).build(),
                         model, blocks);
                 SimEngine pLayer = engine(base.bootstrapServerAddress("127.0.0.1:" + bsLayer.port())
                        .kvRole(KvRole.KV_PRODUCER).engineId("bench-p-layerwise").tp(0, 1).layerwisePush(true).build(),
                         model, blocks);
                 SimEngine d = engine(base.bootstrapServerAddress("127.0.0.1:" + bsBoth.port()).kvRole(KvRole.KV_CONSUMER)
                        .engineId("bench-d").tp(0, 1).layerwisePush(false).build(), model, blocks)) {
                String urlWhole = "http://127.0.0.1:" + bsWhole.port();
                String urlLayer = "http://127.0.0.1:" + bsLayer.port();
                String idWhole = SimProxy.resolveEngineId(urlWhole, 0);
                String idLayer = SimProxy.resolveEngineId(urlLayer, 0);
                double[][] single = new double[2][rounds - 1];
                double[][] whole = new double[3][rounds - 1];
                double[][] layer = new double[3][rounds - 1];
                SplittableRandom rnd = new SplittableRandom(11);
                for (int round = 0; round < rounds; round++) {
                    // a fresh prompt per round: no prefix-cache hit anywhere
                    int[] prompt = new int[promptTokens];
                    prompt[0] = TinyModelWriter.BOS;
                    for (int i = 1; i < promptTokens; i++) {
                        prompt[i] = 3 + rnd.nextInt(model.vocabularySize() - 3);
                    }
                    // the three configurations in a rotating order: a load change on the shared machine
                    // does not always hit the same one
                    Clock s = null;
                    double[] w = null;
                    double[] l = null;
                    for (int k = 0; k < 3; k++) {
                        switch ((round + k) % 3) {
                            case 0 -> {
                                s = new Clock();
                                check(both.submit("single-" + round, prompt, decode + 1, null, s::token)
                                        .get(600, TimeUnit.SECONDS));
                            }
                            case 1 -> w = pair(pWhole, d, urlWhole, idWhole, "whole-" + round, prompt, decode);
                            default -> l = pair(pLayer, d, urlLayer, idLayer, "layer-" + round, prompt, decode);
                        }
                    }
                    System.out.printf(Locale.ROOT, "round %d%s: single prefill %.3f s, decode %.2f tok/s | whole push: "
                            + "P prefill %.3f s, TTFT at D %.3f s, D decode %.2f tok/s | layer-wise push: P prefill "
                            + "%.3f s, TTFT at D %.3f s, D decode %.2f tok/s%n", round, round == 0 ? " (warm-up)" : "",
                            s.firstSeconds(), s.decodeRate(), w[0], w[1], w[2], l[0], l[1], l[2]);
                    if (round > 0) {
                        single[0][round - 1] = s.firstSeconds();
                        single[1][round - 1] = s.decodeRate();
                        for (int k = 0; k < 3; k++) {
                            whole[k][round - 1] = w[k];
                            layer[k][round - 1] = l[k];
                        }
                    }
                }
                double sp = median(single[0]);
                double sd = median(single[1]);
                System.out.printf(Locale.ROOT, "%nmedians of %d rounds (%d prompt tokens, %d decode tokens)%n",
                        rounds - 1, promptTokens, decode);
                System.out.printf(Locale.ROOT, "%-34s %10s %10s %12s %10s %12s%n", "", "prefill s", "prefill t/s",
                        "TTFT s", "TTFT/1node", "decode t/s");
                System.out.printf(Locale.ROOT, "%-34s %10.3f %10.1f %12s %10s %12.2f%n", "single node (kv_both)", sp,
                        promptTokens / sp, String.format(Locale.ROOT, "%.3f", sp), "1.00", sd);
                row("P/D, whole-request push", whole, promptTokens, sp, sd);
                row("P/D, layer-wise push", layer, promptTokens, sp, sd);
                System.out.printf(Locale.ROOT, "decode at D / single node: whole %.3f, layer-wise %.3f; P prefill t/s / "
                        + "single: whole %.3f, layer-wise %.3f%n", median(whole[2]) / sd, median(layer[2]) / sd,
                        sp / median(whole[0]), sp / median(layer[0]));
                // within one request, P's prefill and D's first token share the machine's moment: their
                // difference is what disaggregation adds (transfer not hidden, D's load, D's last-token
                // recompute), free of the load swings between configurations
                System.out.printf(Locale.ROOT, "TTFT at D - P prefill (median): whole %.0f ms (TTFT/P prefill %.3f), "
                        + "layer-wise %.0f ms (%.3f)%n", 1000 * medianDiff(whole[1], whole[0]),
                        medianRatio(whole[1], whole[0]), 1000 * medianDiff(layer[1], layer[0]),
                        medianRatio(layer[1], layer[0]));
            }
        }
    }

    private static void row(String name, double[][] v, int promptTokens, double singlePrefill, double singleDecode) {
        double p = median(v[0]);
        double t = median(v[1]);
        System.out.printf(Locale.ROOT, "%-34s %10.3f %10.1f %12.3f %10.3f %12.2f%n", name, p, promptTokens / p, t,
                t / singlePrefill, median(v[2]));
    }

    /** One request through P and D, sent together as a proxy does: {P prefill s, TTFT at D s, D decode tok/s}. */
    private static double[] pair(SimEngine p, SimEngine d, String url, String engineId, String id, int[] prompt,
            int decode) throws Exception {
        String xfer = SimProxy.newTransferId();
        Clock pc = new Clock();
        CompletableFuture<SimResult> pf = p.submit(id + "-p", prompt, 1, SimProxy.prefillParams(xfer), pc::token);
        Clock dc = new Clock();
        CompletableFuture<SimResult> df = d.submit(id + "-d", prompt, decode + 1,
                SimProxy.decodeParams(xfer, engineId, url), dc::token);
        check(pf.get(600, TimeUnit.SECONDS));
        check(df.get(600, TimeUnit.SECONDS));
        return new double[] {pc.firstSeconds(), dc.firstSeconds(), dc.decodeRate()};
    }

    private static void check(SimResult r) {
        if (!r.ok()) {
            throw new IllegalStateException("request failed: " + r);
        }
    }

    private static SimEngine engine(MooncakeConnectorConfig cfg, JlamaModel model, int blocks) {
        return SimEngine.start(cfg, new JlamaStepModel(model), BLOCK, blocks, SimEngine.Limits.defaults(),
                ConnectorSimWorker.factory("tcp"), SimEngine.KvPlacement.host());
    }

    private static double medianDiff(double[] a, double[] b) {
        double[] d = new double[a.length];
        Arrays.setAll(d, i -> a[i] - b[i]);
        return median(d);
    }

    private static double medianRatio(double[] a, double[] b) {
        double[] d = new double[a.length];
        Arrays.setAll(d, i -> a[i] / b[i]);
        return median(d);
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static String loadAverage() {
        try {
            return java.nio.file.Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (java.io.IOException e) {
            return "?";
        }
    }
}
