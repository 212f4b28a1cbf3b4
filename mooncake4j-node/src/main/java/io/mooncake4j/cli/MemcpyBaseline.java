package io.mooncake4j.cli;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The bench's memcpy reference: the initiator's own layout ({@code threads} threads, each copying
 * its {@code batch} blocks of {@code block} bytes at offsets {@code (i·threads + t)·block}) moved
 * between two buffers of this process with {@link MemorySegment#copy}, for a fixed time. The bench
 * runs it in the same process, half before and half after the transfer run ({@link #plus}), so the
 * ratio compares like with like on a loaded machine.
 *
 * @param bytesPerSecond the copy rate over all threads
 * @param batches        batches copied
 * @param seconds        how long it ran
 */
record MemcpyBaseline(double bytesPerSecond, long batches, double seconds) {

    /** Both measurements as one: total batches over total time. */
    MemcpyBaseline plus(MemcpyBaseline other) {
        double secs = seconds + other.seconds;
        double bytes = bytesPerSecond * seconds + other.bytesPerSecond * other.seconds;
        return new MemcpyBaseline(bytes / secs, batches + other.batches, secs);
    }

    /** Copies for {@code seconds} and returns the rate. Allocates two buffers of {@code threads·batch·block} bytes. */
    static MemcpyBaseline measure(int threads, int batch, long block, double seconds) throws InterruptedException {
        long size = Math.multiplyExact(Math.multiplyExact(block, (long) batch), (long) threads);
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            HostMemoryStorage srcMem = alloc.allocate(size);
            HostMemoryStorage dstMem = alloc.allocate(size);
            MemorySegment src = srcMem.segment();
            MemorySegment dst = dstMem.segment();
            src.fill((byte) 0x5A);
            dst.fill((byte) 0); // first touch outside the timed loop, as the transfer buffers were
            AtomicLong total = new AtomicLong();
            List<Thread> workers = new ArrayList<>();
            long deadline = System.nanoTime() + Math.round(seconds * 1e9);
            long start = System.nanoTime();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                Thread th = new Thread(() -> {
                    long n = 0;
                    while (System.nanoTime() < deadline) {
                        for (int i = 0; i < batch; i++) {
                            long off = ((long) i * threads + thread) * block;
                            MemorySegment.copy(src, off, dst, off, block);
                        }
                        n++;
                    }
                    total.addAndGet(n);
                }, "mooncake-bench-memcpy-" + t);
                th.setDaemon(true);
                workers.add(th);
                th.start();
            }
            for (Thread th : workers) {
                th.join();
            }
            double elapsed = (System.nanoTime() - start) / 1e9;
            long batches = total.get();
            return new MemcpyBaseline(batches * (double) batch * block / elapsed, batches, elapsed);
        }
    }
}
