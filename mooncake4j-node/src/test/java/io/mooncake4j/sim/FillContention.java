package io.mooncake4j.sim;

import io.mooncake4j.memory.ModelPreset;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Micro-check for the layer-wise TTFT bench: is P's KV fill slowed by a concurrent
 * transfer because they share the CPU or because they share memory bandwidth? One thread fills
 * {@code mib} MiB with sequential 8-byte stores, as {@code SyntheticModel.forwardLayer} writes the
 * KV, while a second thread does nothing, a memcpy of the same size in a loop (the mock engine's
 * copy), an ALU-only loop (no memory traffic), or the same fill. The fill's wall and on-CPU time
 * (its own thread's, from the kernel's {@code /proc/thread-self/schedstat}, Linux) are compared against the fill alone, the modes interleaved
 * {@code rounds} times. If the fill's CPU time rises with the memcpy but not with the ALU loop,
 * the cost is memory traffic; if it rises with both, the two vCPUs share a physical core. Not a
 * test: a {@code main}.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp target/test-classes:target/classes io.mooncake4j.sim.FillContention [mib] [rounds] [seq|model]
 * </pre>
 *
 * <p>{@code model} fills with the synthetic model itself ({@link SyntheticModel#forwardLayer}, every
 * layer of Llama-3-8B over {@code mib} MiB of fused KV: per position, one 512-byte run per head at
 * an 8 KiB stride), the layer-wise prefill's exact store pattern; {@code seq} (the default) with
 * plain sequential stores.
 */
public final class FillContention {

    private static volatile long sink;

    private FillContention() {
    }

    public static void main(String[] args) throws Exception {
        int mib = args.length > 0 ? Integer.parseInt(args[0]) : 512;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        long bytes = (long) mib << 20;
        boolean model = args.length > 2 && args[2].equals("model");
        String[] modes = {"alone", "memcpy", "alu", "fill"};
        try (Arena arena = Arena.ofShared(); var alloc = new io.mooncake4j.memory.HostMemoryAllocator()) {
            // with the model, fillDst only names the fill: the model writes its own KV caches
            MemorySegment fillDst = arena.allocate(model ? 8 : bytes, 64);
            if (model) {
                modelFill = new ModelFill(fillDst, bytes, alloc);
            }
            MemorySegment copySrc = arena.allocate(bytes, 64);
            MemorySegment copyDst = arena.allocate(bytes, 64);
            MemorySegment otherFill = arena.allocate(bytes, 64);
            copySrc.fill((byte) 1);
            copyDst.fill((byte) 2);
            otherFill.fill((byte) 3);
            fill(fillDst, 7); // touch every page, JIT
            fill(fillDst, 8);
            List<List<double[]>> byMode = new ArrayList<>();
            for (String m : modes) {
                byMode.add(new ArrayList<>());
            }
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < modes.length; i++) {
                    byMode.get(i).add(once(modes[i], fillDst, copySrc, copyDst, otherFill, r));
                }
            }
            double[] base = median(byMode.get(0));
            System.out.printf(Locale.ROOT, (model ? "synthetic-model " : "sequential ") + "fill of %d MiB, medians of %d interleaved rounds, %d cores, load %s%n", mib,
                    rounds, Runtime.getRuntime().availableProcessors(), load());
            System.out.printf(Locale.ROOT, "%-8s %9s %9s %9s %9s %12s%n", "beside", "wall ms", "cpu ms", "wall/x",
                    "cpu/x", "other GB/s");
            for (int i = 0; i < modes.length; i++) {
                double[] m = median(byMode.get(i));
                System.out.printf(Locale.ROOT, "%-8s %9.1f %9.1f %9.2f %9.2f %12s%n", modes[i], m[0], m[1], m[0] / base[0],
                        m[1] / base[1], m[2] > 0 ? String.format(Locale.ROOT, "%.2f", m[2]) : "-");
            }
        }
    }

    /** One fill beside {@code mode}: {wall ms, cpu ms, the other thread's GB/s moved (memcpy/fill)}. */
    private static double[] once(String mode, MemorySegment dst, MemorySegment src, MemorySegment cdst,
            MemorySegment other, int round) throws InterruptedException {
        AtomicBoolean stop = new AtomicBoolean();
        long[] moved = new long[1];
        long[] otherNanos = new long[1];
        Thread t = null;
        java.util.concurrent.CountDownLatch started = new java.util.concurrent.CountDownLatch(1);
        if (!mode.equals("alone")) {
            t = new Thread(() -> {
                started.countDown();
                long t0 = System.nanoTime();
                long x = 1;
                while (!stop.get()) {
                    switch (mode) {
                        case "memcpy" -> {
                            MemorySegment.copy(src, 0, cdst, 0, src.byteSize());
                            moved[0] += src.byteSize();
                        }
                        case "fill" -> {
                            fill(other, round);
                            moved[0] += other.byteSize();
                        }
                        default -> {
                            for (int k = 0; k < 1_000_000; k++) {
                                x = x * 6364136223846793005L + 1442695040888963407L;
                            }
                        }
                    }
                }
                otherNanos[0] = System.nanoTime() - t0;
                sink += x;
            }, "fill-contention-" + mode);
            t.start();
            started.await();
        }
        long c0 = threadCpuNanos();
        long w0 = System.nanoTime();
        fill(dst, 100 + round);
        long wall = System.nanoTime() - w0;
        long cpu = threadCpuNanos() - c0;
        stop.set(true);
        if (t != null) {
            t.join();
        }
        double gbs = otherNanos[0] == 0 ? 0 : moved[0] / (double) otherNanos[0];
        return new double[] {wall / 1e6, cpu / 1e6, gbs};
    }

    /** The synthetic model over the fill's destination, when the fill is the model's ({@code model}). */
    private static ModelFill modelFill;

    /** Every layer of {@link ModelPreset#LLAMA_3_8B}'s forward pass over KV caches in their own host memory. */
    private static final class ModelFill {
        final MemorySegment seg;
        final SyntheticModel model;
        final int[][] blocks;
        final int tokens;
        final long[] hashes;

        /** The model's KV caches, about {@code bytes} of their own host memory; {@code seg} names the fill. */
        ModelFill(MemorySegment seg, long bytes, io.mooncake4j.memory.HostMemoryAllocator alloc) {
            ModelPreset p = ModelPreset.LLAMA_3_8B;
            int numBlocks = (int) (bytes / p.pageBytes(1) / p.numLayers());
            io.mooncake4j.memory.KvCaches caches = io.mooncake4j.memory.KvCaches.allocate(p, 1, numBlocks,
                    io.mooncake4j.memory.KvCacheLayout.FUSED, alloc::allocate);
            this.seg = seg;
            this.model = new SyntheticModel(p, 1, 0, caches);
            this.tokens = numBlocks * p.blockSize();
            this.blocks = new int[][] {java.util.stream.IntStream.range(0, numBlocks).toArray()};
            this.hashes = new long[tokens];
        }

        void run(long seed) {
            FillPlacement.run(model, hashes, blocks, tokens, seed);
        }
    }

    /** Sequential 8-byte stores over {@code seg}, or the synthetic model's forward pass over it ({@code model}). */
    private static void fill(MemorySegment seg, long seed) {
        if (modelFill != null && modelFill.seg == seg) {
            modelFill.run(seed);
            return;
        }
        long n = seg.byteSize() / Long.BYTES;
        for (long w = 0; w < n; w++) {
            seg.set(ValueLayout.JAVA_LONG, w * Long.BYTES, seed + w * 0x9E3779B97F4A7C15L);
        }
    }

    private static long threadCpuNanos() {
        try {
            return Long.parseLong(java.nio.file.Files.readString(java.nio.file.Path.of("/proc/thread-self/schedstat"))
                    .strip().split("\\s+")[0]);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static double[] median(List<double[]> xs) {
        int k = xs.get(0).length;
        double[] out = new double[k];
        for (int j = 0; j < k; j++) {
            final int jj = j;
            double[] a = xs.stream().mapToDouble(v -> v[jj]).sorted().toArray();
            out[j] = a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
        }
        return out;
    }

    private static String load() {
        try {
            return java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).strip();
        } catch (java.io.IOException e) {
            return "?";
        }
    }
}
