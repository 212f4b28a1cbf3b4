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
 * whose bytes are checked — once as two whole copies, once pipelined through four 4 MiB pinned
 * bounce buffers on two streams ({@link #stage}). Each figure is the median of {@code iterations} timed synchronous
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
            HostMemoryStorage locked = pinned.allocate(bytes);
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

            // the same trip pipelined through small pinned bounce buffers on two streams, the
            // way the TCP transport is meant to stage GPU memory
            fill(pageable.segment(), 4);
            CudaCopies.copy(a, 0, pageable, 0, bytes);
            b.fill((byte) 0);
            double[] staged = new double[iterations];
            try (Stager stager = new Stager(device, STAGE_CHUNK, STAGE_BUFFERS)) {
                for (int i = 0; i <= iterations; i++) {
                    long t0 = System.nanoTime();
                    int rc = stager.run(a.address(), b.address(), bytes);
                    long ns = System.nanoTime() - t0;
                    if (rc != CudaError.SUCCESS) {
                        throw CudaException.failed("pipelined staging", rc, "");
                    }
                    if (i > 0) {
                        staged[i - 1] = bytes / (double) ns;
                    }
                }
            }
            pageable.segment().fill((byte) 0);
            CudaCopies.copy(pageable, 0, b, 0, bytes);
            check(pageable.segment(), 4);
            out.add(result("GPU->pinned->GPU pipelined", bytes, staged));
        }
        return out;
    }

    static final long STAGE_CHUNK = 4L << 20;
    static final int STAGE_BUFFERS = 4;

    /**
     * Copies {@code bytes} from device address {@code src} to device address {@code dst} through
     * pinned host bounce buffers; see {@link Stager}. Returns the first CUDA error, or 0.
     */
    static int stage(long src, long dst, long bytes, long chunk, int buffers, int device) {
        try (Stager stager = new Stager(device, chunk, buffers)) {
            return stager.run(src, dst, bytes);
        }
    }

    /**
     * GPU→host→GPU through {@code buffers} pinned bounce buffers of {@code chunk} bytes:
     * device-to-host on one stream, host-to-device on another; chunk i's upload waits on its
     * download's event, and the download into a buffer waits on that buffer's previous upload.
     * One owner thread.
     */
    static final class Stager implements AutoCloseable {
        private final CudaPinnedHostAllocator pinned = new CudaPinnedHostAllocator();
        private final CudaStream down;
        private final CudaStream up;
        private final HostMemoryStorage[] bounce;
        private final CudaEvent[] downloaded;
        private final CudaEvent[] uploaded;
        private final long chunk;

        Stager(int device, long chunk, int buffers) {
            this.chunk = chunk;
            this.bounce = new HostMemoryStorage[buffers];
            this.downloaded = new CudaEvent[buffers];
            this.uploaded = new CudaEvent[buffers];
            CudaStream d = null;
            CudaStream u = null;
            try {
                d = CudaStream.create(device);
                u = CudaStream.create(device);
                for (int k = 0; k < buffers; k++) {
                    bounce[k] = pinned.allocate(chunk);
                    downloaded[k] = CudaEvent.create(device);
                    uploaded[k] = CudaEvent.create(device);
                }
            } catch (RuntimeException e) {
                this.down = d;
                this.up = u;
                close();
                throw e;
            }
            this.down = d;
            this.up = u;
        }

        int run(long src, long dst, long bytes) {
            int buffers = bounce.length;
            int i = 0;
            for (long off = 0; off < bytes; off += chunk, i++) {
                int k = i % buffers;
                long n = Math.min(chunk, bytes - off);
                int rc = i >= buffers ? down.waitFor(uploaded[k]) : CudaError.SUCCESS;
                rc = rc != 0 ? rc : down.copyAsync(bounce[k].address(), src + off, n, CudaCopyKind.DEVICE_TO_HOST);
                rc = rc != 0 ? rc : downloaded[k].record(down);
                rc = rc != 0 ? rc : up.waitFor(downloaded[k]);
                rc = rc != 0 ? rc : up.copyAsync(dst + off, bounce[k].address(), n, CudaCopyKind.HOST_TO_DEVICE);
                rc = rc != 0 ? rc : uploaded[k].record(up);
                if (rc != CudaError.SUCCESS) {
                    return rc;
                }
            }
            int rc = up.synchronize();
            int rc2 = down.synchronize();
            return rc != 0 ? rc : rc2;
        }

        @Override
        public void close() {
            for (int k = 0; k < bounce.length; k++) {
                if (downloaded[k] != null) {
                    downloaded[k].close();
                }
                if (uploaded[k] != null) {
                    uploaded[k].close();
                }
            }
            if (up != null) {
                up.close();
            }
            if (down != null) {
                down.close();
            }
            pinned.close();
        }
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
