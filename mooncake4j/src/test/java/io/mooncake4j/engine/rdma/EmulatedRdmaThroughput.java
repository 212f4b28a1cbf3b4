package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A quick check of the RDMA engine's own data-path cost, not a test: engines on the emulated
 * fabric (every work request is a memcpy under one lock), batches like
 * {@code transfer_engine_bench}. It measures slicing, posting, polling and completion handling,
 * not a NIC. Besides GB/s it prints descriptors (work requests) per second and the bytes
 * allocated per descriptor by the data-path threads (workers, pollers; ThreadMXBean, measured in steady state after a warm-up) and the process CPU time per descriptor. Run with
 * {@code java --enable-native-access=ALL-UNNAMED -cp target/classes:target/test-classes:$(cat cp.txt)
 * io.mooncake4j.engine.rdma.EmulatedRdmaThroughput [blockBytes] [batch] [seconds] [threads] [idlePeers]}:
 * {@code threads} initiator threads submit at once (slice pool contention); {@code idlePeers}
 * extra peers each get one connected endpoint on the initiator's NIC that then stays idle (the
 * poller's per-endpoint cost).
 */
public final class EmulatedRdmaThroughput {

    private EmulatedRdmaThroughput() {}

    public static void main(String[] args) throws Exception {
        long block = args.length > 0 ? Long.parseLong(args[0]) : 65536;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 128;
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 5;
        int threads = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        int idlePeers = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        long size = block * batch;
        List<String> names = new ArrayList<>(List.of("emu0", "emu1"));
        for (int p = 0; p < idlePeers; p++) {
            names.add("idle" + p);
        }
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider(names.toArray(new String[0]));
        List<CoreEngine> idle = new ArrayList<>();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine target = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(Map.of()));
                CoreEngine initiator = EmulatedEngines.started(fabric, "emu1",
                        EmulatedEngines.config(Map.of()))) {
            HostMemoryStorage l = alloc.allocate(size * threads);
            HostMemoryStorage r = alloc.allocate(size * threads);
            initiator.registerMemory(l.address(), size * threads, "cpu:0");
            target.registerMemory(r.address(), size * threads, "cpu:0");
            for (int p = 0; p < idlePeers; p++) { // one endpoint each on emu1, then idle
                CoreEngine e = EmulatedEngines.started(fabric, "idle" + p, EmulatedEngines.config(Map.of()));
                idle.add(e);
                HostMemoryStorage m = alloc.allocate(4096);
                e.registerMemory(m.address(), 4096, "cpu:0");
                if (initiator.batchTransferSyncWrite(e.getLocalSegmentName(), new long[] {l.address()},
                        new long[] {m.address()}, new long[] {4096}) != 0) {
                    throw new IllegalStateException("idle peer transfer failed");
                }
            }
            String name = target.getLocalSegmentName();
            CyclicBarrier warmedUp = new CyclicBarrier(threads + 1);
            CyclicBarrier start = new CyclicBarrier(threads + 1); // the window opens once every thread warmed up
            AtomicLong batches = new AtomicLong();
            AtomicLong workerBytes = new AtomicLong();
            long[] endAt = new long[1];
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long base = (long) t * size;
                workers.add(Thread.ofPlatform().name("bench-" + t).start(() -> {
                    long[] src = new long[batch];
                    long[] dst = new long[batch];
                    long[] len = new long[batch];
                    for (int i = 0; i < batch; i++) {
                        src[i] = l.address() + base + i * block;
                        dst[i] = r.address() + base + i * block;
                        len[i] = block;
                    }
                    for (int i = 0; i < 50; i++) { // warm-up
                        initiator.batchTransferSyncWrite(name, src, dst, len);
                    }
                    try {
                        warmedUp.await();
                        start.await();
                        long mine0 = allocatedBytes(Thread.currentThread());
                        while (System.nanoTime() < endAt[0]) {
                            if (initiator.batchTransferSyncWrite(name, src, dst, len) != 0) {
                                throw new IllegalStateException("transfer failed");
                            }
                            batches.incrementAndGet();
                        }
                        workerBytes.addAndGet(allocatedBytes(Thread.currentThread()) - mine0);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }));
            }
            warmedUp.await();
            long posts0 = fabric.postCalls();
            long wrs0 = fabric.postedRequests();
            long alloc0 = allocatedBytes();
            long cpu0 = processCpuNanos();
            long t0 = System.nanoTime();
            endAt[0] = t0 + (long) (seconds * 1e9);
            start.await();
            for (Thread w : workers) {
                w.join();
            }
            double s = (System.nanoTime() - t0) / 1e9;
            long allocated = allocatedBytes() - alloc0 + workerBytes.get();
            long cpu = processCpuNanos() - cpu0;
            long wrs = fabric.postedRequests() - wrs0;
            System.out.printf(Locale.ROOT, "block %d B, batch %d, %d thread(s), %d idle peer(s): %.2f GB/s,"
                    + " %.0f descriptors/s, %.1f descriptors per post, %.1f B allocated per descriptor,"
                    + " %.2f us CPU per descriptor%n", block, batch, threads, idlePeers,
                    batches.get() * size / s / 1e9, wrs / s, (double) wrs / Math.max(1, fabric.postCalls() - posts0),
                    (double) allocated / Math.max(1, wrs), cpu / 1e3 / Math.max(1, wrs));
        } finally {
            for (CoreEngine e : idle) {
                e.close();
            }
        }
    }

    /** CPU time of the whole process so far ({@code com.sun.management.OperatingSystemMXBean}, reflectively). */
    private static long processCpuNanos() throws ReflectiveOperationException {
        Object os = Class.forName("java.lang.management.ManagementFactory").getMethod("getOperatingSystemMXBean")
                .invoke(null);
        return (long) Class.forName("com.sun.management.OperatingSystemMXBean").getMethod("getProcessCpuTime")
                .invoke(os);
    }

    /**
     * Bytes allocated so far by the engines' pollers (the workers count their own): HotSpot's
     * {@code com.sun.management.ThreadMXBean}, reached reflectively (the test module does not read
     * java.management; this class runs from the class path).
     */
    private static long allocatedBytes() throws ReflectiveOperationException {
        long sum = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("mooncake-rdma-poller-")) {
                sum += allocatedBytes(t);
            }
        }
        return sum;
    }

    private static long allocatedBytes(Thread t) throws ReflectiveOperationException {
        Object mx = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
        Class<?> sun = Class.forName("com.sun.management.ThreadMXBean");
        return Math.max(0, (long) sun.getMethod("getThreadAllocatedBytes", long.class).invoke(mx, t.threadId()));
    }
}
