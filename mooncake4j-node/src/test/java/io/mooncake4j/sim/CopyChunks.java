package io.mooncake4j.sim;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Probe for the mock engine's transfer time, a part of the layer-wise TTFT figures: 1 GiB copied with
 * {@link MemorySegment#copy} in one call, and in chunks of 1 MiB down to 16 KiB (the mock
 * engine copies one descriptor per call: a whole run of blocks, or one 64 KiB block when the two
 * sides' block orders differ). Medians of 8 interleaved rounds. Not a test: a {@code main}.
 *
 * <pre>
 * java -cp target/test-classes io.mooncake4j.sim.CopyChunks
 * </pre>
 */
public final class CopyChunks {

    private CopyChunks() {
    }

    public static void main(String[] args) {
        final long gib = 1L << 30;
        try (Arena ar = Arena.ofShared()) {
            MemorySegment s = ar.allocate(gib, 4096);
            MemorySegment d = ar.allocate(gib, 4096);
            s.fill((byte) 1);
            d.fill((byte) 2);
            int[] sizes = {1 << 30, 1 << 20, 256 << 10, 64 << 10, 16 << 10};
            Map<Integer, List<Double>> t = new LinkedHashMap<>();
            for (int z : sizes) {
                t.put(z, new ArrayList<>());
            }
            for (int r = 0; r < 9; r++) {
                for (int z : sizes) {
                    long t0 = System.nanoTime();
                    for (long o = 0; o < gib; o += z) {
                        MemorySegment.copy(s, o, d, o, z);
                    }
                    if (r > 0) { // the first round warms up
                        t.get(z).add((System.nanoTime() - t0) / 1e6);
                    }
                }
            }
            for (Map.Entry<Integer, List<Double>> e : t.entrySet()) {
                List<Double> v = new ArrayList<>(e.getValue());
                Collections.sort(v);
                System.out.printf(Locale.ROOT, "%10d-byte chunks: median %.1f ms, min %.1f%n", e.getKey(), v.get(v.size() / 2),
                        v.get(0));
            }
        }
    }
}
