package io.mooncake4j.engine.rdma;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.Locale;
import java.util.Map;

/**
 * A quick check of the RDMA engine's own data-path cost, not a test: two engines on the emulated
 * fabric (every work request is a memcpy under one lock), one initiator thread, batches like
 * {@code transfer_engine_bench}. It measures slicing, posting, polling and completion handling,
 * not a NIC. Run with {@code java --enable-native-access=ALL-UNNAMED -cp
 * target/classes:target/test-classes:$(cat cp.txt) io.mooncake4j.engine.rdma.EmulatedRdmaThroughput
 * [blockBytes] [batch] [seconds]}.
 */
public final class EmulatedRdmaThroughput {

    private EmulatedRdmaThroughput() {}

    public static void main(String[] args) {
        long block = args.length > 0 ? Long.parseLong(args[0]) : 65536;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 128;
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 5;
        long size = block * batch;
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                RdmaTransferEngine target = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(Map.of()));
                RdmaTransferEngine initiator = EmulatedEngines.started(fabric, "emu1",
                        EmulatedEngines.config(Map.of()))) {
            HostMemoryStorage l = alloc.allocate(size);
            HostMemoryStorage r = alloc.allocate(size);
            initiator.registerMemory(l.address(), size, "cpu:0");
            target.registerMemory(r.address(), size, "cpu:0");
            long[] src = new long[batch];
            long[] dst = new long[batch];
            long[] len = new long[batch];
            for (int i = 0; i < batch; i++) {
                src[i] = l.address() + i * block;
                dst[i] = r.address() + i * block;
                len[i] = block;
            }
            String name = target.getLocalSegmentName();
            for (int i = 0; i < 50; i++) {
                initiator.batchTransferSyncWrite(name, src, dst, len);
            }
            long posts0 = fabric.postCalls();
            long wrs0 = fabric.postedRequests();
            long bytes = 0;
            long batches = 0;
            long t0 = System.nanoTime();
            long end = t0 + (long) (seconds * 1e9);
            while (System.nanoTime() < end) {
                if (initiator.batchTransferSyncWrite(name, src, dst, len) != 0) {
                    throw new IllegalStateException("transfer failed");
                }
                bytes += size;
                batches++;
            }
            double s = (System.nanoTime() - t0) / 1e9;
            long wrs = fabric.postedRequests() - wrs0;
            System.out.printf(Locale.ROOT, "block %d B, batch %d: %.2f GB/s, %.0f batches/s, %.0f work requests/s,"
                    + " %.1f work requests per post%n", block, batch, bytes / s / 1e9, batches / s, wrs / s,
                    (double) wrs / Math.max(1, fabric.postCalls() - posts0));
        }
    }
}
