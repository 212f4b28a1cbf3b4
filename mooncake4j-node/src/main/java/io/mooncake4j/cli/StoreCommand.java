package io.mooncake4j.cli;

import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.StoreConfig;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code bin/mooncake4j store put|get|exists|rm|bench --master HOST:PORT}: a Mooncake Store client on
 * the command line. {@code bench} puts then gets batches of values from registered memory (zero-copy,
 * Mooncake's {@code batch_put_from}/{@code batch_get_into}) for a duration and reports operations
 * and bytes per second with batch latency percentiles; {@code --raw} also times this client's engine
 * writing and reading the same bytes to the same segment without the master, for the ratio.
 */
final class StoreCommand implements CliCommand {

    @Override
    public String name() {
        return "store";
    }

    @Override
    public String summary() {
        return "Mooncake Store client: put, get, exists, rm, bench against a mooncake_master";
    }

    @Override
    public String usage() {
        return """
                usage: bin/mooncake4j store <put|get|exists|rm|bench> --master HOST:PORT [flags]
                  put    --key K (--value TEXT | --size BYTES)       put a value (text, or SIZE pattern bytes)
                  get    --key K                                     print the value's size and first bytes
                  exists --key K                                     1 present, 0 absent
                  rm     --key K [--force]                           remove (force ignores leases)
                  bench  [--value-size 64K] [--batch 128] [--threads 1] [--duration 10] [--verify] [--raw]
                         [--segment-size 1G] [--local-hostname 127.0.0.1]
                flags: --master (required), --segment-size (memory this process contributes, default 64M;
                bench: large enough for every value written), --local-hostname
                """;
    }

    // the action is positional, so the command checks its flags itself (flagNames() stays empty)
    private static final Set<String> FLAGS = Set.of("master", "key", "value", "size", "force", "value-size", "batch", "threads", "duration", "verify",
                "raw", "segment-size", "local-hostname");

    @Override
    public int run(Flags f, PrintStream out, PrintStream err) throws Exception {
        f.rejectUnknown(FLAGS);
        List<String> pos = f.positional();
        if (pos.size() != 1) {
            throw new Flags.UsageException("store needs one action: put, get, exists, rm or bench");
        }
        String master = f.string("master", null);
        if (master == null) {
            throw new Flags.UsageException("--master HOST:PORT is required");
        }
        String action = pos.getFirst();
        long segment = f.positiveLong("segment-size", action.equals("bench") ? 1L << 30 : 64L << 20);
        StoreConfig cfg = StoreConfig.loopback(master).withGlobalSegmentSize(segment)
                .withLocalBufferSize(64L << 20);
        cfg = new StoreConfig(f.string("local-hostname", "127.0.0.1"), cfg.metadataServer(), cfg.globalSegmentSize(),
                cfg.localBufferSize(), cfg.protocol(), cfg.deviceName(), master, cfg.tenantId(), Duration.ofSeconds(10),
                cfg.pingInterval());
        return switch (action) {
            case "put", "get", "exists", "rm" -> single(action, f, cfg, out, err);
            case "bench" -> StoreBench.run(f, cfg, out, err);
            default -> throw new Flags.UsageException("unknown store action '" + action + "'");
        };
    }

    private static int single(String action, Flags f, StoreConfig cfg, PrintStream out, PrintStream err) {
        String key = f.string("key", null);
        if (key == null) {
            throw new Flags.UsageException("--key is required");
        }
        String text = f.string("value", null);
        long size = f.longValue("size", -1);
        boolean force = f.bool("force", false);
        try (MooncakeStoreClient c = MooncakeStoreClient.setup(cfg)) {
            switch (action) {
                case "put" -> {
                    byte[] v;
                    if (text != null) {
                        v = text.getBytes(StandardCharsets.UTF_8);
                    } else if (size >= 0) {
                        v = new byte[Math.toIntExact(size)];
                        for (int i = 0; i < v.length; i++) {
                            v[i] = (byte) (i * 31 + 7);
                        }
                    } else {
                        throw new Flags.UsageException("put needs --value TEXT or --size BYTES");
                    }
                    int rc = c.put(key, v, ReplicateConfig.defaults());
                    out.printf(Locale.ROOT, "put %s: %d bytes, rc %d%n", key, v.length, rc);
                    return rc == 0 ? 0 : 1;
                }
                case "get" -> {
                    long n = c.getSize(key);
                    if (n < 0) {
                        err.printf(Locale.ROOT, "get %s: %s%n", key, io.mooncake4j.store.ErrorCode.describe((int) n));
                        return 1;
                    }
                    byte[] v = c.get(key);
                    out.printf(Locale.ROOT, "get %s: %d bytes%n", key, v.length);
                    String shown = new String(v, 0, Math.min(v.length, 200), StandardCharsets.UTF_8);
                    out.println(shown);
                    return 0;
                }
                case "exists" -> {
                    int r = c.isExist(key);
                    out.println(r);
                    return r >= 0 ? 0 : 1;
                }
                default -> {
                    int rc = c.remove(key, force);
                    out.printf(Locale.ROOT, "rm %s: rc %d%n", key, rc);
                    return rc == 0 ? 0 : 1;
                }
            }
        }
    }

    /** The bench, apart so that the command stays short. */
    static final class StoreBench {
        private StoreBench() {}

        static int run(Flags f, StoreConfig cfg, PrintStream out, PrintStream err) throws Exception {
            long valueSize = f.positiveLong("value-size", 64L << 10);
            int batch = f.positiveInt("batch", 128);
            int threads = f.positiveInt("threads", 1);
            long seconds = f.positiveLong("duration", 10);
            boolean verify = f.bool("verify", false);
            boolean raw = f.bool("raw", false);
            long perThread = valueSize * batch;
            if (perThread * threads * 2 > cfg.globalSegmentSize()) {
                throw new Flags.UsageException(String.format(Locale.ROOT,
                        "--segment-size %d is too small for %d threads x batch %d x %d bytes (twice, for the removals)",
                        cfg.globalSegmentSize(), threads, batch, valueSize));
            }
            try (MooncakeStoreClient c = MooncakeStoreClient.setup(cfg); Arena arena = Arena.ofShared()) {
                c.removeAll(true);
                MemorySegment src = arena.allocate(perThread * threads, 4096);
                MemorySegment dst = arena.allocate(perThread * threads, 4096);
                for (long i = 0; i < src.byteSize(); i += 8) {
                    src.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
                }
                if (c.registerBuffer(src.address(), src.byteSize()) != 0 || c.registerBuffer(dst.address(), dst.byteSize()) != 0) {
                    err.println("store bench: cannot register the buffers");
                    return 1;
                }
                Phase put = new Phase("put");
                Phase get = new Phase("get");
                AtomicLong failures = new AtomicLong();
                long end = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
                List<Thread> ts = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    final int tid = t;
                    ts.add(Thread.ofPlatform().name("store-bench-" + t).start(() -> {
                        LatencyHistogram hp = new LatencyHistogram();
                        LatencyHistogram hg = new LatencyHistogram();
                        long[] addrS = new long[batch];
                        long[] addrD = new long[batch];
                        long[] sizes = new long[batch];
                        for (int i = 0; i < batch; i++) {
                            addrS[i] = src.address() + tid * perThread + i * valueSize;
                            addrD[i] = dst.address() + tid * perThread + i * valueSize;
                            sizes[i] = valueSize;
                        }
                        long round = 0;
                        long sumPut = 0;
                        long sumGet = 0;
                        while (System.nanoTime() < end) {
                            List<String> keys = new ArrayList<>(batch);
                            for (int i = 0; i < batch; i++) {
                                keys.add("bench-" + tid + "-" + round + "-" + i);
                            }
                            long t0 = System.nanoTime();
                            int[] pr = c.batchPutFrom(keys, addrS, sizes, ReplicateConfig.defaults());
                            long t1 = System.nanoTime();
                            long[] gr = c.batchGetInto(keys, addrD, sizes);
                            long t2 = System.nanoTime();
                            hp.record(t1 - t0);
                            hg.record(t2 - t1);
                            sumPut += t1 - t0;
                            sumGet += t2 - t1;
                            for (int i = 0; i < batch; i++) {
                                if (pr[i] != 0 || gr[i] != valueSize) {
                                    failures.incrementAndGet();
                                }
                            }
                            if (verify && dst.asSlice(tid * perThread, perThread).mismatch(src.asSlice(tid * perThread, perThread)) >= 0) {
                                failures.incrementAndGet();
                            }
                            c.master().batchRemove(keys, true);
                            round++;
                        }
                        put.add(hp, sumPut);
                        get.add(hg, sumGet);
                    }));
                }
                for (Thread t : ts) {
                    t.join();
                }
                out.printf(Locale.ROOT, "store bench: value %d B, batch %d, threads %d, %d s%s%n", valueSize, batch, threads,
                        seconds, verify ? ", verified" : "");
                put.print(out, batch, valueSize, threads);
                get.print(out, batch, valueSize, threads);
                out.printf(Locale.ROOT, "failures %d, backpressure %d%n", failures.get(), c.backpressureCount());
                if (raw) {
                    rawEngine(c, src, dst, perThread, batch, valueSize, seconds, out);
                }
                timeExists(c, out);
                return failures.get() == 0 ? 0 : 1;
            }
        }

        /** This client's engine writing and reading the same bytes into its own mounted segment, no master. */
        private static void rawEngine(MooncakeStoreClient c, MemorySegment src, MemorySegment dst, long perThread, int batch,
                long valueSize, long seconds, PrintStream out) {
            var seg = c.segments().getFirst();
            long[] s = new long[batch];
            long[] d = new long[batch];
            long[] r = new long[batch];
            long[] n = new long[batch];
            for (int i = 0; i < batch; i++) {
                s[i] = src.address() + i * valueSize;
                d[i] = dst.address() + i * valueSize;
                r[i] = seg.base() + i * valueSize;
                n[i] = valueSize;
            }
            LatencyHistogram hw = new LatencyHistogram();
            LatencyHistogram hr = new LatencyHistogram();
            long sw = 0;
            long sr = 0;
            long end = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                c.engine().batchTransferSyncWrite(seg.teEndpoint(), s, r, n);
                long t1 = System.nanoTime();
                c.engine().batchTransferSyncRead(seg.teEndpoint(), d, r, n);
                long t2 = System.nanoTime();
                hw.record(t1 - t0);
                hr.record(t2 - t1);
                sw += t1 - t0;
                sr += t2 - t1;
            }
            Phase w = new Phase("raw write");
            w.add(hw, sw);
            Phase rd = new Phase("raw read");
            rd.add(hr, sr);
            w.print(out, batch, valueSize, 1);
            rd.print(out, batch, valueSize, 1);
        }

        private static void timeExists(MooncakeStoreClient c, PrintStream out) {
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < 1000; i++) {
                keys.add("exists-probe-" + i);
            }
            LatencyHistogram h = new LatencyHistogram();
            for (int i = 0; i < 200; i++) {
                long t0 = System.nanoTime();
                c.batchIsExist(keys);
                h.record(System.nanoTime() - t0);
            }
            out.printf(Locale.ROOT, "batchIsExist 1000 keys (one RPC): p50 %.3f ms, p99 %.3f ms, %d calls%n",
                    h.percentile(0.50) / 1e6, h.percentile(0.99) / 1e6, h.count());
        }
    }

    /** One phase's batch latencies and busy time, merged over threads. */
    static final class Phase {
        final String name;
        final LatencyHistogram all = new LatencyHistogram();
        long busyNanos;

        Phase(String name) {
            this.name = name;
        }

        synchronized void add(LatencyHistogram h, long nanos) {
            all.add(h);
            busyNanos += nanos;
        }

        /** Rate over the time spent in this phase (per thread, so threads in parallel add up). */
        synchronized void print(PrintStream out, int batch, long valueSize, int threads) {
            long batches = all.count();
            double busy = Math.max(1, busyNanos) / 1e9 / threads;
            double ops = batches * (double) batch / busy;
            out.printf(Locale.ROOT, "%-9s %10.0f ops/s %8.3f GB/s  batch p50 %8.3f ms  p99 %8.3f ms  (%d batches)%n", name,
                    ops, ops * valueSize / 1e9, all.percentile(0.50) / 1e6, all.percentile(0.99) / 1e6, batches);
        }
    }
}
