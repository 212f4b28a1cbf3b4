package io.mooncake4j.connector.worker.plan.bench;

import io.mooncake4j.connector.worker.plan.DescriptorBuffer;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import io.mooncake4j.connector.worker.plan.TransferTopology;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Transfer planning for one 128k-token request on a Llama-3-8B-shaped KV cache: 32 layers,
 * block size 16 (8192 blocks per layer), 8 KV heads x 128 dims x bf16 x (K+V) = 64 KiB blocks.
 *
 * <ul>
 *   <li>{@code planFragmented}: P and D block ids are independent random permutations, so no
 *       two blocks coalesce: 32 x 8192 = 262,144 descriptors.</li>
 *   <li>{@code planContiguous}: both sides contiguous: one descriptor per layer (32).</li>
 *   <li>{@code planHeteroTp}: P tp=2 -> D tp=1, contiguous ids; half-block slices cannot be
 *       coalesced: 262,144 descriptors.</li>
 *   <li>{@code baselineFill}: the same 262,144 descriptors written by a trivial loop through
 *       {@link DescriptorBuffer#add}, as the yardstick for the fragmented case.</li>
 *   <li>{@code baselineArrays}: the same descriptors stored straight into three {@code long[]}
 *       (the memory-bandwidth floor).</li>
 * </ul>
 *
 * <p>Run: see {@code docs/performance.md} (JMH via {@code org.openjdk.jmh.Main} on the test class path).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class TransferPlanningBenchmark {

    static final int LAYERS = 32;
    static final int BLOCKS = 131_072 / 16;
    static final long BLOCK_BYTES = 16L * 8 * 128 * 2 * 2;

    private TransferPlanner planner;
    private TransferPlanner heteroPlanner;
    private PreparedRegions regions;
    private PreparedRegions heteroRegions;
    private int[][] fragmentedLocal;
    private int[][] fragmentedRemote;
    private int[][] contiguousLocal;
    private int[][] contiguousRemote;
    private final DescriptorBuffer out = new DescriptorBuffer(LAYERS * BLOCKS);
    private final long[] rawSrc = new long[LAYERS * BLOCKS];
    private final long[] rawDst = new long[LAYERS * BLOCKS];
    private final long[] rawLen = new long[LAYERS * BLOCKS];

    @Setup(Level.Trial)
    public void setUp() {
        planner = new TransferPlanner(new TransferTopology(0, 1, false, false, 8));
        regions = planner.prepare(layers(0x10_0000_0000L, BLOCK_BYTES), layers(0x20_0000_0000L, BLOCK_BYTES), 0, 1,
                false);
        heteroPlanner = new TransferPlanner(new TransferTopology(1, 2, false, false, 8));
        heteroRegions = heteroPlanner.prepare(layers(0x10_0000_0000L, BLOCK_BYTES / 2),
                layers(0x20_0000_0000L, BLOCK_BYTES), 0, 1, false);
        if (!regions.ok() || !heteroRegions.ok()) {
            throw new IllegalStateException(regions.error() + " / " + heteroRegions.error());
        }
        Random random = new Random(42);
        fragmentedLocal = new int[][] {permutation(random)};
        fragmentedRemote = new int[][] {permutation(random)};
        int[] ids = new int[BLOCKS];
        for (int i = 0; i < BLOCKS; i++) {
            ids[i] = i + 1;
        }
        contiguousLocal = new int[][] {ids};
        contiguousRemote = new int[][] {ids.clone()};
    }

    private static List<TransferRegion> layers(long base, long blockLen) {
        List<TransferRegion> r = new ArrayList<>(LAYERS);
        for (int l = 0; l < LAYERS; l++) {
            r.add(new TransferRegion("model.layers." + l + ".self_attn.attn", l, base + l * (BLOCKS + 1L) * blockLen,
                    blockLen, blockLen, 0));
        }
        return r;
    }

    private static int[] permutation(Random random) {
        int[] ids = new int[BLOCKS];
        for (int i = 0; i < BLOCKS; i++) {
            ids[i] = i + 1;
        }
        for (int i = BLOCKS - 1; i > 0; i--) {
            int j = random.nextInt(i + 1);
            int t = ids[i];
            ids[i] = ids[j];
            ids[j] = t;
        }
        return ids;
    }

    @Benchmark
    public int planFragmented() {
        out.clear();
        planner.planRequest("req", fragmentedLocal, fragmentedRemote, regions, out);
        return out.size();
    }

    @Benchmark
    public int planContiguous() {
        out.clear();
        planner.planRequest("req", contiguousLocal, contiguousRemote, regions, out);
        return out.size();
    }

    @Benchmark
    public int planHeteroTp() {
        out.clear();
        heteroPlanner.planRequest("req", contiguousLocal, contiguousRemote, heteroRegions, out);
        return out.size();
    }

    @Benchmark
    public int baselineFill() {
        out.clear();
        int[] l = fragmentedLocal[0];
        int[] r = fragmentedRemote[0];
        for (int layer = 0; layer < LAYERS; layer++) {
            long src = 0x10_0000_0000L + layer * (BLOCKS + 1L) * BLOCK_BYTES;
            long dst = 0x20_0000_0000L + layer * (BLOCKS + 1L) * BLOCK_BYTES;
            for (int i = 0; i < BLOCKS; i++) {
                out.add(src + l[i] * BLOCK_BYTES, dst + r[i] * BLOCK_BYTES, BLOCK_BYTES);
            }
        }
        return out.size();
    }

    @Benchmark
    public long baselineArrays() {
        int[] l = fragmentedLocal[0];
        int[] r = fragmentedRemote[0];
        int pos = 0;
        for (int layer = 0; layer < LAYERS; layer++) {
            long src = 0x10_0000_0000L + layer * (BLOCKS + 1L) * BLOCK_BYTES;
            long dst = 0x20_0000_0000L + layer * (BLOCKS + 1L) * BLOCK_BYTES;
            for (int i = 0; i < BLOCKS; i++) {
                rawSrc[pos] = src + l[i] * BLOCK_BYTES;
                rawDst[pos] = dst + r[i] * BLOCK_BYTES;
                rawLen[pos] = BLOCK_BYTES;
                pos++;
            }
        }
        return rawSrc[pos - 1] + rawDst[0] + rawLen[pos / 2];
    }
}
