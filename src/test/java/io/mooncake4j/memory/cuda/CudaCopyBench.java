package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * A short copy benchmark on one GPU: host-to-device and device-to-host with pageable and with
 * pinned host memory, device-to-device, and a GPU→host→GPU round trip through pinned memory
 * whose bytes are checked. Each figure is the median of {@code iterations} timed synchronous
 * copies of {@code sizeMiB} MiB after one warm-up copy, in GB/s (10^9 bytes per second).
 *
 * <pre>java -cp ... io.mooncake4j.memory.cuda.CudaCopyBench [sizeMiB=256] [iterations=5] [device=0]</pre>
 */
public final class CudaCopyBench {

    /** One measured figure. */
    public record Result(String name, long bytes, int iterations, double medianGbps, double bestGbps) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%-28s %6d MiB x%d  median %7.2f GB/s  best %7.2f GB/s",
                    name, bytes >> 20, iterations, medianGbps, bestGbps);
        }
    }

    private CudaCopyBench() {}

    public static void main(String[] args) {
        long sizeMiB = args.length > 0 ? Long.parseLong(args[0]) : 256;
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int device = args.length > 2 ? Integer.parseInt(args[2]) : 0;
        CudaAvailability.ensureAvailable();
        for (Result r : run(sizeMiB << 20, iterations, device)) {
            System.out.println(r);
        }
    }

    /** Runs every measurement; throws if CUDA fails or the round trip corrupts bytes. */
    public static List<Result> run(long bytes, int iterations, int device) {
        List<Result> out = new ArrayList<>();
        try (HostMemoryAllocator host = new HostMemoryAllocator();
             CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator();
             CudaDeviceStorage a = CudaDeviceStorage.allocate(device, bytes);
             CudaDeviceStorage b = CudaDeviceStorage.allocate(device, bytes)) {
            HostMemoryStorage pageable = host.allocate(bytes);
            CudaPinnedHostStorage locked = pinned.allocate(bytes);
            fill(pageable.segment(), 1);
            fill(locked.segment(), 2);
            out.add(measure("H2D pageable", a, pageable, bytes, iterations));
            out.add(measure("H2D pinned", a, locked, bytes, iterations));
            out.add(measure("D2H pageable", pageable, a, bytes, iterations));
            out.add(measure("D2H pinned", locked, a, bytes, iterations));
            out.add(measure("D2D", b, a, bytes, iterations));

            // GPU -> pinned host -> GPU, then verify on the host
            fill(pageable.segment(), 3);
            CudaCopies.copy(a, 0, pageable, 0, bytes);
            double[] gbps = new double[iterations];
            for (int i = 0; i <= iterations; i++) {
                long t0 = System.nanoTime();
                CudaCopies.copy(locked, 0, a, 0, bytes);
                CudaCopies.copy(b, 0, locked, 0, bytes);
                long ns = System.nanoTime() - t0;
                if (i > 0) {
                    gbps[i - 1] = bytes / (double) ns; // bytes per ns == GB/s
                }
            }
            pageable.segment().fill((byte) 0);
            CudaCopies.copy(pageable, 0, b, 0, bytes);
            check(pageable.segment(), 3);
            out.add(result("GPU->pinned->GPU (verified)", bytes, gbps));
        }
        return out;
    }

    private static Result measure(String name, MemoryStorage dst, MemoryStorage src, long bytes, int iterations) {
        CudaCopies.copy(dst, 0, src, 0, bytes); // warm-up
        double[] gbps = new double[iterations];
        for (int i = 0; i < iterations; i++) {
            long t0 = System.nanoTime();
            CudaCopies.copy(dst, 0, src, 0, bytes);
            gbps[i] = bytes / (double) (System.nanoTime() - t0);
        }
        return result(name, bytes, gbps);
    }

    private static Result result(String name, long bytes, double[] gbps) {
        double[] sorted = gbps.clone();
        Arrays.sort(sorted);
        return new Result(name, bytes, gbps.length, sorted[sorted.length / 2], sorted[sorted.length - 1]);
    }

    private static void fill(MemorySegment s, long seed) {
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, seed * 0x9E3779B97F4A7C15L ^ i);
        }
    }

    private static void check(MemorySegment s, long seed) {
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            if (s.get(ValueLayout.JAVA_LONG_UNALIGNED, i) != (seed * 0x9E3779B97F4A7C15L ^ i)) {
                throw new IllegalStateException("GPU->host->GPU round trip corrupted byte offset " + i);
            }
        }
    }
}
