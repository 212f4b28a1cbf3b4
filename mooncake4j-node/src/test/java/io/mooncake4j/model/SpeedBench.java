package io.mooncake4j.model;

import com.github.tjake.jlama.tensor.operations.TensorOperationsProvider;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimResult;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Prefill and decode tokens/s of one {@code kv_both} model node (the engine's real path: scheduling, Jlama's
 * forward pass, the KV copies between Jlama's pages and the blocks), nothing else running in the JVM; not a
 * test. {@code scripts/model-speed.sh} runs it in alternating JVMs, one with Jlama's Vector API kernels
 * ({@code -Djlama.force_panama_tensor_operations=true}, what ran before {@code jlama-native} was on the class
 * path) and one with whatever Jlama picks (its native kernels when they load), so that both see the same
 * moments of the shared machine.
 *
 * <p>Arguments: {@code MODEL_DIR [PROMPT_TOKENS=256] [DECODE_TOKENS=32] [ROUNDS=3] [DTYPE=F32]}; the first
 * round warms up and is not counted; prints one result line, {@code SPEED ops=... prefill_tps=...
 * decode_tps=... load=...}, the medians of the other rounds.
 */
public final class SpeedBench {

    private static final int BLOCK = 16;

    private SpeedBench() {}

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int promptTokens = args.length > 1 ? Integer.parseInt(args[1]) : 256;
        int decode = args.length > 2 ? Integer.parseInt(args[2]) : 32;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 3;
        String dtype = args.length > 4 ? args[4] : "F32";
        try (JlamaModel model = JlamaModel.load(dir, dtype)) {
            int blocks = (promptTokens + decode + 1) / BLOCK + 4;
            MooncakeConnectorConfig cfg = MooncakeConnectorConfig.builder().kvRole(KvRole.KV_BOTH).engineId("speed")
                    .protocol("tcp").hostname("127.0.0.1").bootstrapPort(0).numWorkers(1).tp(0, 1).build();
            JlamaStepModel steps = new JlamaStepModel(model);
            long runNanos = 0;
            try (SimEngine e = SimEngine.start(cfg, steps, BLOCK, blocks,
                    SimEngine.Limits.defaults(), ConnectorSimWorker.factory(
                            c -> TransferEngines.create("tcp"), b -> b.bootstrapBindHost("127.0.0.1")),
                    SimEngine.KvPlacement.host())) {
                List<Double> prefill = new ArrayList<>();
                List<Double> dec = new ArrayList<>();
                long copyNanos = 0; // KV rows copied between Jlama's pages and the blocks, counted rounds
                SplittableRandom rnd = new SplittableRandom(7);
                for (int round = 0; round < rounds; round++) {
                    int[] prompt = new int[promptTokens]; // a fresh prompt: no prefix-cache hit
                    prompt[0] = TinyModelWriter.BOS;
                    for (int i = 1; i < promptTokens; i++) {
                        prompt[i] = 3 + rnd.nextInt(model.vocabularySize() - 3);
                    }
                    long[] copy0 = steps.copyStats();
                    long start = System.nanoTime();
                    List<Long> at = new ArrayList<>();
                    SimResult r = e.submit("speed-" + round, prompt, decode + 1, null, t -> at.add(System.nanoTime()))
                            .get(1800, TimeUnit.SECONDS);
                    if (!r.ok()) {
                        throw new IllegalStateException("request failed: " + r);
                    }
                    double p = promptTokens / ((at.getFirst() - start) / 1e9);
                    double d = (at.size() - 1) / ((at.getLast() - at.getFirst()) / 1e9);
                    System.out.printf(Locale.ROOT, "round %d%s: prefill %.1f tok/s, decode %.2f tok/s%n", round,
                            round == 0 ? " (warm-up)" : "", p, d);
                    if (round > 0) {
                        prefill.add(p);
                        dec.add(d);
                        runNanos += at.getLast() - start;
                        copyNanos += steps.copyStats()[1] - copy0[1];
                    }
                }
                System.out.printf(Locale.ROOT, "SPEED ops=%s layout=%s prompt=%d decode=%d prefill_tps=%.1f "
                        + "decode_tps=%.2f copy_share=%.4f load=%s%n", TensorOperationsProvider.get().name().replace(' ', '_'),
                        model.kvLayout(), promptTokens, decode, median(prefill), median(dec),
                        runNanos == 0 ? Double.NaN : copyNanos / (double) runNanos,
                        Files.readString(Path.of("/proc/loadavg")).trim().replace(' ', ','));
            }
        }
    }

    private static double median(List<Double> v) {
        double[] s = v.stream().mapToDouble(Double::doubleValue).toArray();
        Arrays.sort(s);
        return s.length == 0 ? Double.NaN : s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
