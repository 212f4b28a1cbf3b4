package io.mooncake4j.memory;

import java.lang.foreign.MemorySegment;
import java.util.Locale;

/**
 * Not a test: measures what shareable (memfd) host memory costs against private memory, in
 * alternation in one JVM: two allocations of {@code args[0]} MiB (default 1024) filled once
 * (allocation + first touch) and then copied five times. docs/shm.md has the figures and command.
 */
public final class ShareableMemoryCostProbe {

    private ShareableMemoryCostProbe() {}

    public static void main(String[] args) {
        long size = (args.length > 0 ? Long.parseLong(args[0]) : 1024) << 20;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        for (int round = 1; round <= rounds; round++) {
            for (boolean shared : new boolean[] {false, true}) {
                try (HostMemoryAllocator al = new HostMemoryAllocator()) {
                    long t0 = System.nanoTime();
                    HostMemoryStorage s = shared ? al.allocateShareable(size) : al.allocatePrivate(size);
                    HostMemoryStorage d = shared ? al.allocateShareable(size) : al.allocatePrivate(size);
                    s.segment().fill((byte) 1);
                    d.segment().fill((byte) 2);
                    long t1 = System.nanoTime();
                    for (int i = 0; i < 5; i++) {
                        MemorySegment.copy(s.segment(), 0, d.segment(), 0, size);
                    }
                    long t2 = System.nanoTime();
                    System.out.printf(Locale.ROOT, "round %d %s: alloc + first touch of 2 x %d MiB %.0f ms, "
                            + "memcpy %.2f GiB/s%n", round, shared ? "memfd  " : "private", size >> 20,
                            (t1 - t0) / 1e6, 5.0 * size / (1L << 30) / ((t2 - t1) / 1e9));
                }
            }
        }
    }
}
