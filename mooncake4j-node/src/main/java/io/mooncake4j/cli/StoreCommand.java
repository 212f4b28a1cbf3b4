package io.mooncake4j.cli;

import io.mooncake4j.store.ErrorCode;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.Result;
import io.mooncake4j.store.StoreConfig;
import io.mooncake4j.store.StoreException;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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
                  put    --key K (--value TEXT | --file PATH | --size BYTES)   put a value
                  get    --key K [--out PATH]                        print the size and first bytes, or write the value
                  exists --key K                                     1 present, 0 absent
                  rm     --key K [--force]                           remove (force ignores leases)
                  hold   [--segment-size 1G]                         contribute a segment until stopped (SIGTERM)
                  bench  [--value-size 64K] [--batch 128] [--threads 1] [--duration 10] [--verify] [--raw]
                         [--segment-size 1G] [--local-hostname 127.0.0.1]
                flags: --master (required), --segment-size (memory this process contributes: put, get, exists
                and rm contribute none unless given, so a value is always placed in a long-lived client's
                segment, e.g. a hold's; a put given one keeps running while its value is in its own segment;
                hold: 1G; bench: 1G, or 0 to contribute none), --local-hostname, --metadata-server
                (P2PHANDSHAKE, default, or http://HOST:PORT/metadata: also publish this process's segment there
                for C++ clients). The bench writes keys under a prefix of its own and removes only those.
                """;
    }

    // the action is positional, so the command checks its flags itself (flagNames() stays empty)
    private static final Set<String> FLAGS = Set.of("master", "key", "value", "size", "force", "value-size", "batch",
            "threads", "duration", "verify", "raw", "segment-size", "local-hostname", "metadata-server", "file", "out");

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
        long segment = f.longValue("segment-size", action.equals("bench") || action.equals("hold") ? 1L << 30 : 0);
        if (segment < 0 || segment == 0 && action.equals("hold")) {
            throw new Flags.UsageException("--segment-size must be positive" + (action.equals("hold") ? "" : " or 0")
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

    private static int single(String action, Flags f, StoreConfig cfg, PrintStream out, PrintStream err)
            throws IOException, InterruptedException {
        String key = f.string("key", null);
        if (key == null) {
            throw new Flags.UsageException("--key is required");
        }
        byte[] value = action.equals("put") ? value(f) : null;
        String outFile = f.string("out", null);
        if (outFile != null && !action.equals("get")) {
            throw new Flags.UsageException("--out is for get");
        }
        boolean force = f.bool("force", false);
        MooncakeStoreClient c = MooncakeStoreClient.setup(cfg);
        boolean holding = false;
        try {
            switch (action) {
                case "put" -> {
                    int rc = c.put(key, value, ReplicateConfig.defaults());
                    if (rc == ErrorCode.NO_AVAILABLE_HANDLE.code()) {
                        err.printf(Locale.ROOT, "put %s: no segment in the pool has room for %d bytes (%s): start"
                                + " `bin/mooncake4j store hold --master %s` to contribute memory that outlives one-shot"
                                + " commands, or pass --segment-size to keep the value in this process%n", key,
                                value.length, ErrorCode.describe(rc), cfg.masterServerAddress());
                        return 1;
                    }
                    if (rc != 0) {
                        err.printf(Locale.ROOT, "put %s: %s%n", key, ErrorCode.describe(rc));
                        return 1;
                    }
                    out.printf(Locale.ROOT, "put %s: %d bytes%n", key, value.length);
                    if (cfg.globalSegmentSize() > 0 && inOwnSegment(c, key)) {
                        // leaving now would take the value with this process's segment
                        out.printf(Locale.ROOT, "put %s: the master placed the value in this process's own segment;"
                                + " holding it until SIGTERM (start `store hold` to keep values beyond one-shot puts)%n", key);
                        out.flush();
                        holding = true;
                        holdUntilStopped(c, err);
                    }
                    return 0;
                }
                case "get" -> {
                    Result<byte[]> g = c.getValue(key);
                    if (!g.ok()) {
                        err.printf(Locale.ROOT, "get %s: %s%n", key, g.missing() ? "no such key"
                                : ErrorCode.describe(g.code()));
                        return 1;
                    }
                    byte[] v = g.value();
                    if (outFile != null) {
                        Files.write(Path.of(outFile), v);
                        out.printf(Locale.ROOT, "get %s: %d bytes written to %s%n", key, v.length, outFile);
                    } else {
                        out.printf(Locale.ROOT, "get %s: %d bytes%n", key, v.length);
                        out.println(new String(v, 0, Math.min(v.length, 200), StandardCharsets.UTF_8));
                    }
                    return 0;
                }
                case "exists" -> {
                    int r = c.isExist(key);
                    if (r < 0) {
                        err.printf(Locale.ROOT, "exists %s: %s%n", key, ErrorCode.describe(r));
                        return 1;
                    }
                    out.println(r);
                    return 0;
                }
                default -> {
                    int rc = c.remove(key, force);
                    if (rc != 0) {
                        err.printf(Locale.ROOT, "rm %s: %s%n", key, ErrorCode.describe(rc));
                        return 1;
                    }
                    out.printf(Locale.ROOT, "rm %s: removed%n", key);
                    return 0;
                }
            }
        } finally {
            if (!holding) {
                c.close();
            }
        }
    }

    /** {@return the value of a put: --value TEXT, --file PATH or --size BYTES of a pattern, exactly one} */
    private static byte[] value(Flags f) throws IOException {
        String text = f.string("value", null);
        String file = f.string("file", null);
        long size = f.longValue("size", -1);
        int given = (text != null ? 1 : 0) + (file != null ? 1 : 0) + (size >= 0 ? 1 : 0);
        if (given != 1) {
            throw new Flags.UsageException("put needs exactly one of --value TEXT, --file PATH or --size BYTES");
        }
        if (text != null) {
            return text.getBytes(StandardCharsets.UTF_8);
        }
        if (file != null) {
            Path p = Path.of(file);
            if (!Files.isRegularFile(p)) {
                throw new Flags.UsageException("--file " + file + " is not a readable file");
            }
            long n = Files.size(p);
            if (n > Integer.MAX_VALUE - 16) {
                throw new Flags.UsageException("--file " + file + " is " + n + " bytes; the copying put takes at most 2 GiB");
            }
            return Files.readAllBytes(p);
        }
        if (size > Integer.MAX_VALUE - 16) {
            throw new Flags.UsageException("--size " + size + " is over the copying put's 2 GiB");
        }
        byte[] v = new byte[(int) size];
        for (int i = 0; i < v.length; i++) {
            v[i] = (byte) (i * 31 + 7);
        }
        return v;
    }

    /** {@return whether a replica of {@code key} lies in this client's own segment} */
    private static boolean inOwnSegment(MooncakeStoreClient c, String key) {
        try {
            return c.master().getReplicaList(key).orThrow().replicas().stream()
                    .anyMatch(r -> r.endpoint().equals(c.endpoint()));
        } catch (StoreException e) {
            // cannot tell: holding is the safe side
            return true;
        }
    }

    /**
     * Contributes a segment to the pool until SIGTERM: the other side of a two-process bench, or a
     * node whose memory outlives one-shot tools.
     */
    private static int hold(StoreConfig cfg, PrintStream out, PrintStream err) throws InterruptedException {
        MooncakeStoreClient c = MooncakeStoreClient.setup(cfg);
        out.printf(Locale.ROOT, "mooncake4j store hold: segment %s (%d bytes) mounted at %s; SIGTERM stops%n",
                c.getHostname(), cfg.globalSegmentSize(), cfg.masterServerAddress());
        out.flush();
        holdUntilStopped(c, err);
        return 0;
    }

    /** Keeps {@code c} (and its segment) until SIGTERM, then unmounts and exits 0. */
    private static void holdUntilStopped(MooncakeStoreClient c, PrintStream err) throws InterruptedException {
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            c.close();
            err.println("mooncake4j store: unmounted, stopped");
            err.flush();
            stopped.countDown();
            // a JVM ended by SIGTERM exits 143; an orderly unmount exits 0
            Runtime.getRuntime().halt(0);
        }, "mooncake-store-hold-shutdown"));
        stopped.await();
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
