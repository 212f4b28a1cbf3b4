package io.mooncake4j.model;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * What the copy between Jlama's KV pages and the connector's blocks costs ({@link JlamaStepModel}),
 * next to the prefill it accompanies: a generated model of real-sized KV rows (8 KV heads of 128,
 * 4 KiB per row in F32, 2 KiB in BF16), one prompt prefilled (rows copied out: P's side), then the
 * same prompt continued by a fresh request (rows copied in: D's side).
 *
 * <pre>
 *   mvn -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath
 *   java --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED \
 *     -cp target/test-classes:target/classes:$(cat target/test.classpath) io.mooncake4j.model.CopyCostBench [tokens] [dtype]
 * </pre>
 */
public final class CopyCostBench {

    private CopyCostBench() {}

    public static void main(String[] args) throws Exception {
        int tokens = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
        String dtype = args.length > 1 ? args[1] : "F32";
        Path dir = Files.createTempDirectory("copy-cost-");
        // hidden 1024 = 8 heads of 128, 8 KV heads: Llama-3-8B's KV row per layer; 4 layers
        TinyModelWriter.write(dir, new TinyModelWriter.Shape(1024, 4, 8, 8, 1024, 4096, 1));
        try (JlamaModel m = JlamaModel.load(dir, dtype); HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            int block = 16;
            int blocks = (tokens + block - 1) / block + 1;
            KvCaches caches = KvCaches.allocate(m.kvShape(block), 1, blocks, KvCacheLayout.FUSED, alloc::allocate);
            int[] ids = new int[blocks];
            for (int i = 0; i < blocks; i++) {
                ids[i] = i;
            }
            int[] prompt = new int[tokens];
            for (int i = 0; i < tokens; i++) {
                prompt[i] = 3 + (i * 31) % (m.vocabularySize() - 3);
            }
            for (int round = 0; round < 3; round++) {
                JlamaStepModel p = new JlamaStepModel(m);
                p.bind(caches);
                long t0 = System.nanoTime();
                p.forward("p" + round, prompt, ids, 0, tokens);
                long prefill = System.nanoTime() - t0;
                long[] out = p.copyStats();
                p.close();
                JlamaStepModel d = new JlamaStepModel(m);
                d.bind(caches);
                long t1 = System.nanoTime();
                d.forward("d" + round, prompt, ids, tokens - 1, tokens);
                long dStep = System.nanoTime() - t1;
                long[] in = d.copyStats();
                d.close();
                double gib = 1024.0 * 1024 * 1024;
                System.out.printf(Locale.ROOT,
                        "round %d %s %d tokens: prefill %.1f ms (%.0f tok/s) incl. copy-out %.2f ms of %.1f MiB "
                                + "(%.2f GiB/s, %.2f s/GiB); D step %.1f ms incl. copy-in %.2f ms of %.1f MiB "
                                + "(%.2f GiB/s, %.2f s/GiB)%n",
                        round, dtype, tokens, prefill / 1e6, tokens / (prefill / 1e9), out[1] / 1e6,
                        out[0] / 1048576.0, out[0] / gib / (out[1] / 1e9), (out[1] / 1e9) / (out[0] / gib),
                        dStep / 1e6, in[1] / 1e6, in[0] / 1048576.0, in[0] / gib / (in[1] / 1e9),
                        (in[1] / 1e9) / (in[0] / gib));
            }
        } finally {
            try (var s = Files.walk(dir)) {
                for (Path f : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(f);
                }
            }
        }
    }
}
