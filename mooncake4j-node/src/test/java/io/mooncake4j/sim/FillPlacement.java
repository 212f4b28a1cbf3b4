package io.mooncake4j.sim;

import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.memory.ModelPreset;
import java.lang.foreign.*;
import java.lang.invoke.MethodHandle;
import java.util.*;

/**
 * Probe for the layer-wise TTFT bench: does the synthetic model's KV fill run at one
 * speed on every region of memory, and at one speed over time? {@code regions} regions of
 * {@code mib} MiB each (anonymous {@code mmap}, 2 MiB-aligned, with {@code huge}
 * {@code madvise(MADV_HUGEPAGE)} first), each holding Llama-3-8B KV caches; every round fills each
 * region once with {@link SyntheticModel#forwardLayer} over all layers, and the per-region times
 * are printed. Not a test: a {@code main}.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.sim.FillPlacement 4 1024 7 4k|huge
 * </pre>
 */
public final class FillPlacement {
    static final Linker L = Linker.nativeLinker();
    static final MethodHandle MMAP = L.downcallHandle(L.defaultLookup().find("mmap").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT,
                    ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
    static final MethodHandle MADV = L.downcallHandle(L.defaultLookup().find("madvise").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));

    private FillPlacement() {
    }

    /** A region's slice as a layer's storage (never freed: the process ends). */
    private record Seg(MemorySegment seg) implements MemoryStorage {
        @Override
        public long address() {
            return seg.address();
        }

        @Override
        public long byteSize() {
            return seg.byteSize();
        }

        @Override
        public String location() {
            return "cpu:0";
        }

        @Override
        public Optional<MemorySegment> hostSegment() {
            return Optional.of(seg);
        }
    }

    static MemorySegment map(long bytes, boolean huge) throws Throwable {
        MemorySegment a = (MemorySegment) MMAP.invokeExact(MemorySegment.NULL, bytes, 3, 0x22, -1, 0L);
        if (a.address() == -1L) {
            throw new IllegalStateException("mmap of " + bytes + " bytes failed");
        }
        a = a.reinterpret(bytes);
        if (huge) {
            int rc = (int) MADV.invokeExact(a, bytes, 14);
            if (rc != 0) {
                throw new IllegalStateException("madvise(MADV_HUGEPAGE) failed");
            }
        }
        a.fill((byte) 0);
        return a;
    }

    public static void main(String[] args) throws Throwable {
        int regions = Integer.parseInt(args[0]);
        int mib = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        boolean huge = args[3].equals("huge");
        ModelPreset p = ModelPreset.LLAMA_3_8B;
        long bytes = (long) mib << 20;
        int numBlocks = (int) (bytes / p.pageBytes(1) / p.numLayers());
        List<SyntheticModel> models = new ArrayList<>();
        for (int r = 0; r < regions; r++) {
            MemorySegment s = map(bytes + (2 << 20), huge);
            // align to 2 MiB
            long base = (s.address() + (2 << 20) - 1) & ~((2L << 20) - 1);
            MemorySegment al = s.asSlice(base - s.address(), bytes);
            long[] off = {0};
            KvCaches c = KvCaches.allocate(p, 1, numBlocks, KvCacheLayout.FUSED, size -> {
                MemorySegment x = al.asSlice(off[0], size);
                off[0] += size;
                return new Seg(x);
            });
            models.add(new SyntheticModel(p, 1, 0, c));
        }
        int tokens = numBlocks * p.blockSize();
        int[][] blocks = {java.util.stream.IntStream.range(0, numBlocks).toArray()};
        long[] hashes = new long[tokens];
        double[][] t = new double[regions][rounds];
        for (int warm = 0; warm < 2; warm++) {
            for (SyntheticModel m : models) {
                run(m, hashes, blocks, tokens, warm);
            }
        }
        for (int k = 0; k < rounds; k++) {
            for (int r = 0; r < regions; r++) {
                long t0 = System.nanoTime();
                run(models.get(r), hashes, blocks, tokens, k + 10);
                t[r][k] = (System.nanoTime() - t0) / 1e6;
            }
        }
        String ah = new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of("/proc/meminfo")));
        System.out.println((huge ? "MADV_HUGEPAGE" : "4K pages") + " regions " + regions + " x " + mib + " MiB; "
                + ah.lines().filter(l -> l.startsWith("AnonHugePages")).findFirst().orElse(""));
        for (int r = 0; r < regions; r++) {
            double[] a = t[r].clone();
            Arrays.sort(a);
            System.out.printf(Locale.ROOT, "region %d: median %.1f ms  min %.1f  max %.1f  all %s%n", r, a[rounds / 2], a[0],
                    a[rounds - 1], Arrays.toString(Arrays.stream(t[r]).mapToLong(Math::round).toArray()));
        }
    }

    /** One prefill of {@code tokens} over every layer, as the layer-wise bench's: KV derived from {@code seed}. */
    static void run(SyntheticModel m, long[] hashes, int[][] blocks, int tokens, long seed) {
        for (int i = 0; i < tokens; i++) {
            hashes[i] = seed * 1_000_003L + i;
        }
        for (int l = 0; l < ModelPreset.LLAMA_3_8B.numLayers(); l++) {
            m.forwardLayer(l, hashes, blocks, 0, tokens, false);
        }
    }
}
