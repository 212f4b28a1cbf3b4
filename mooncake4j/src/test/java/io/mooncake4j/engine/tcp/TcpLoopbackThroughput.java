package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.Locale;

/**
 * A quick loopback throughput check, not a test: two engines in one JVM, one initiator thread,
 * batches like {@code transfer_engine_bench}. Run with
 * {@code java -cp target/classes:target/test-classes:$(cat cp.txt) io.mooncake4j.engine.tcp.TcpLoopbackThroughput
 * [write|read] [blockBytes] [batch] [seconds]}.
 */
public final class TcpLoopbackThroughput {

    private TcpLoopbackThroughput() {}

    public static void main(String[] args) {
        String op = args.length > 0 ? args[0] : "write";
        long block = args.length > 1 ? Long.parseLong(args[1]) : 1 << 20;
        int batch = args.length > 2 ? Integer.parseInt(args[2]) : 128;
        double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 5;
        long size = Math.max(1L << 30, block * batch);
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine target = TcpEngines.started(envConfig());
                CoreEngine initiator = TcpEngines.started(envConfig())) {
            HostMemoryStorage l = alloc.allocate(size);
            HostMemoryStorage r = alloc.allocate(size);
            l.segment().fill((byte) 1);
            r.segment().fill((byte) 2);
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
            boolean write = op.equals("write");
            for (int i = 0; i < 3; i++) {
                run(initiator, name, write, src, dst, len);
            }
            long t0 = System.nanoTime();
            long end = t0 + (long) (seconds * 1e9);
            long batches = 0;
            while (System.nanoTime() < end) {
                if (run(initiator, name, write, src, dst, len) != 0) {
                    throw new IllegalStateException("transfer failed");
                }
                batches++;
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            double bytes = (double) batches * batch * block;
            System.out.printf(Locale.ROOT, "%s block=%d batch=%d: %.2f GB/s (%.0f descriptors/s) over %.1f s%n", op,
                    block, batch, bytes / secs / 1e9, batches * batch / secs, secs);
        }
    }

    private static TcpConfig envConfig() {
        return TcpConfig.fromEnvironment(io.mooncake4j.engine.spi.EngineSettings.processEnvironment(),
                io.mooncake4j.engine.handshake.HandshakeConfig.ephemeral(TcpEngines.LOOPBACK));
    }

    private static int run(CoreEngine e, String name, boolean write, long[] s, long[] d, long[] l) {
        return write ? e.batchTransferSyncWrite(name, s, d, l) : e.batchTransferSyncRead(name, s, d, l);
    }
}
