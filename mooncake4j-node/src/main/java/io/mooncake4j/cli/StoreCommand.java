package io.mooncake4j.cli;

import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.StoreConfig;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

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
                usage: bin/mooncake4j store <put|get|exists|rm|hold|bench> --master HOST:PORT [flags]
                  put    --key K (--value TEXT | --size BYTES)       put a value (text, or SIZE pattern bytes)
                  get    --key K                                     print the value's size and first bytes
                  exists --key K                                     1 present, 0 absent
                  rm     --key K [--force]                           remove (force ignores leases)
                  hold   [--segment-size 1G]                         contribute a segment until stopped (SIGTERM)
                  bench  [--value-size 64K] [--batch 128] [--threads 1] [--duration 10] [--verify] [--raw]
                         [--segment-size 1G] [--local-hostname 127.0.0.1]
                flags: --master (required), --segment-size (memory this process contributes, default 64M;
                hold: 1G; bench: 1G, large enough for every value written, or 0 to contribute none, so
                that the master places the values in other processes' segments, e.g. a hold), --local-hostname,
                --metadata-server (P2PHANDSHAKE, default, or http://HOST:PORT/metadata: also publish this
                process's segment there for C++ clients)
                """;
    }

    // the action is positional, so the command checks its flags itself (flagNames() stays empty)
    private static final Set<String> FLAGS = Set.of("master", "key", "value", "size", "force", "value-size", "batch",
            "threads", "duration", "verify", "raw", "segment-size", "local-hostname", "metadata-server");

    @Override
    public int run(Flags f, PrintStream out, PrintStream err) throws Exception {
        f.rejectUnknown(FLAGS);
        List<String> pos = f.positional();
        if (pos.size() != 1) {
            throw new Flags.UsageException("store needs one action: put, get, exists, rm, hold or bench");
        }
        String master = f.string("master", null);
        if (master == null) {
            throw new Flags.UsageException("--master HOST:PORT is required");
        }
        String action = pos.getFirst();
        long segment = f.longValue("segment-size", action.equals("bench") || action.equals("hold") ? 1L << 30 : 64L << 20);
        if (segment < 0 || segment == 0 && !action.equals("bench")) {
            throw new Flags.UsageException("--segment-size must be positive" + (action.equals("bench") ? " or 0" : "")
                    + ", got " + segment);
        }
        StoreConfig cfg = StoreConfig.loopback(master).withGlobalSegmentSize(segment)
                .withLocalBufferSize(64L << 20);
        cfg = new StoreConfig(f.string("local-hostname", "127.0.0.1"), f.string("metadata-server", cfg.metadataServer()),
                cfg.globalSegmentSize(),
                cfg.localBufferSize(), cfg.protocol(), cfg.deviceName(), master, cfg.tenantId(), Duration.ofSeconds(10),
                cfg.pingInterval());
        return switch (action) {
            case "put", "get", "exists", "rm" -> single(action, f, cfg, out, err);
            case "bench" -> StoreBench.run(f, cfg, out, err);
            case "hold" -> hold(cfg, out, err);
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

    /**
     * Contributes a segment to the pool until SIGTERM: the other side of a two-process bench, or a
     * node whose memory outlives one-shot tools.
     */
    private static int hold(StoreConfig cfg, PrintStream out, PrintStream err) throws InterruptedException {
        MooncakeStoreClient c = MooncakeStoreClient.setup(cfg);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            c.close();
            err.println("mooncake4j store hold: unmounted, stopped");
            err.flush();
            stopped.countDown();
            // a JVM ended by SIGTERM exits 143; an orderly unmount exits 0
            Runtime.getRuntime().halt(0);
        }, "mooncake-store-hold-shutdown"));
        out.printf(Locale.ROOT, "mooncake4j store hold: segment %s (%d bytes) mounted at %s; SIGTERM stops%n",
                c.getHostname(), cfg.globalSegmentSize(), cfg.masterServerAddress());
        out.flush();
        stopped.await();
        return 0;
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

        synchronized long batches() {
            return all.count();
        }

        synchronized double busySeconds() {
            return Math.max(1, busyNanos) / 1e9;
        }

        synchronized double p50() {
            return all.percentile(0.50);
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
