package io.mooncake4j.store;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The store client's put and get vs the transfer engine's raw write and read of the same bytes into
 * the same replica buffers, same run, not a test (no assertions). The master is the in-memory
 * {@link FakeMaster} on a thread of this JVM (real coro_rpc wire over a loopback socket); a holder
 * client contributes the segment, the measured client contributes none, so every byte crosses the
 * real TCP engine on loopback. Each round: the store's {@code batchPutFrom} and {@code batchGetInto}
 * of {@code batch} fresh keys (then removed), the raw write and read of a batch the store placed
 * once, and the same put and get done step by step with the master's and the engine's public calls
 * (each step timed), and the batch put as two puts of half of it in flight at once (two threads), the
 * four taking turns at each position of a round. It also times the fake master's
 * calls alone (BatchPutStart + BatchPutRevoke, BatchGetReplicaList of the batch, Ping), so the reader
 * can weigh its latency against mooncake_master's.
 * Run (after {@code mvn -B -ntp -q -pl mooncake4j-store -am -DskipTests verify} and
 * {@code mvn -B -ntp -q -o -pl mooncake4j-store dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test}):
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp mooncake4j/target/classes:mooncake4j-store/target/classes:mooncake4j-store/target/test-classes:$(cat mooncake4j-store/target/test.classpath) \
 *     io.mooncake4j.store.StoreDataPathBench [value-bytes] [batch] [rounds] [parts-per-key]
 * </pre>
 */
public final class StoreDataPathBench {

    private StoreDataPathBench() {}

    public static void main(String[] args) throws Exception {
        long value = args.length > 0 ? Long.parseLong(args[0]) : 64L << 10;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 128;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 200;
        int parts = args.length > 3 ? Integer.parseInt(args[3]) : 1;
        System.out.printf(Locale.ROOT, "load average at start: %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
        long per = value * batch;
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient holder = MooncakeStoreClient.setup(cfg(m, 4 * per + (16L << 20)));
                MooncakeStoreClient c = MooncakeStoreClient.setup(cfg(m, 0));
                Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocate(per, 4096);
            MemorySegment dst = arena.allocate(per, 4096);
            for (long i = 0; i < per; i += 8) {
                src.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            if (c.registerBuffer(src.address(), per) != 0 || c.registerBuffer(dst.address(), per) != 0) {
                throw new IllegalStateException("cannot register");
            }
            long part = value / parts;
            long[][] a = new long[batch][];
            long[][] d = new long[batch][];
            long[][] s = new long[batch][];
            for (int i = 0; i < batch; i++) {
                a[i] = new long[parts];
                d[i] = new long[parts];
                s[i] = new long[parts];
                for (int p = 0; p < parts; p++) {
                    a[i][p] = src.address() + i * value + p * part;
                    d[i][p] = dst.address() + i * value + p * part;
                    s[i][p] = part;
                }
            }
            // the raw target: one batch the store placed, its replicas' buffers written and read directly
            List<String> rawKeys = keys("raw-", batch);
            int[] pr = c.batchPutFromMultiBuffers(rawKeys, a, s, ReplicateConfig.defaults());
            List<Result<ReplicaList>> lists = c.master().batchGetReplicaList(rawKeys);
            String target = null;
            int n = batch * parts;
            long[] ls = new long[n];
            long[] ld = new long[n];
            long[] lr = new long[n];
            long[] ln = new long[n];
            for (int i = 0; i < batch; i++) {
                if (pr[i] != 0 || !lists.get(i).ok()) {
                    throw new IllegalStateException("raw put failed: " + pr[i] + " " + lists.get(i));
                }
                ReplicaDescriptor rep = lists.get(i).value().replicas().getFirst();
                target = rep.endpoint();
                for (int p = 0; p < parts; p++) {
                    ls[i * parts + p] = a[i][p];
                    ld[i * parts + p] = d[i][p];
                    lr[i * parts + p] = rep.address() + p * part;
                    ln[i * parts + p] = part;
                }
            }
            long[][] parts3 = new long[5][rounds];
            long[] put = new long[rounds];
            long[] get = new long[rounds];
            long[] rw = new long[rounds];
            long[] two = new long[rounds];
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
            int half = batch / 2;
            long[] rr = new long[rounds];
            long failures = 0;
            for (int r = -rounds / 10; r < rounds; r++) { // the first tenth warms up
                List<String> keys = keys("k" + r + "-", batch);
                long[] raw = null;
                long[] steps = null;
                int[] p = null;
                long[] g = null;
                long t0 = 0;
                long t1 = 0;
                long t2 = 0;
                // the client's put+get, the raw write+read and the steps by hand take turns at each position
                long twoNanos = 0;
                for (int j = 0; j < 4; j++) {
                    switch ((r + 40 + j) % 4) {
                        case 0 -> {
                            t0 = System.nanoTime();
                            p = c.batchPutFromMultiBuffers(keys, a, s, ReplicateConfig.defaults());
                            t1 = System.nanoTime();
                            g = c.batchGetIntoMultiBuffers(keys, d, s);
                            t2 = System.nanoTime();
                        }
                        case 1 -> raw = raw(c, target, ls, ld, lr, ln);
                        case 2 -> steps = steps(c, keys("s" + r + "-", batch), value, ls, ld, ln, parts);
                        default -> {
                            // the batch as two puts of half of it in flight at once (two threads)
                            List<String> k2 = keys("h" + r + "-", batch);
                            long t3 = System.nanoTime();
                            var f1 = pool.submit(() -> c.batchPutFromMultiBuffers(k2.subList(0, half),
                                    Arrays.copyOfRange(a, 0, half), Arrays.copyOfRange(s, 0, half), ReplicateConfig.defaults()));
                            var f2 = pool.submit(() -> c.batchPutFromMultiBuffers(k2.subList(half, batch),
                                    Arrays.copyOfRange(a, half, batch), Arrays.copyOfRange(s, half, batch), ReplicateConfig.defaults()));
                            int[] h1 = f1.get();
                            int[] h2 = f2.get();
                            twoNanos = System.nanoTime() - t3;
                            for (int x : h1) {
                                failures += x != 0 ? 1 : 0;
                            }
                            for (int x : h2) {
                                failures += x != 0 ? 1 : 0;
                            }
                            c.batchRemove(k2, true);
                        }
                    }
                }
                for (int i = 0; i < batch; i++) {
                    if (p[i] != 0 || g[i] != value) {
                        failures++;
                    }
                }
                if (dst.mismatch(src) >= 0) {
                    failures++;
                }
                c.batchRemove(keys, true);
                if (r >= 0) {
                    for (int j = 0; j < steps.length; j++) {
                        parts3[j][r] = steps[j];
                    }
                    put[r] = t1 - t0;
                    get[r] = t2 - t1;
                    rw[r] = raw[0];
                    rr[r] = raw[1];
                    two[r] = twoNanos;
                }
            }
            double mib = per / (double) (1 << 20);
            System.out.printf(Locale.ROOT, "value %d B (%d parts), batch %d (%.1f MiB), %d rounds, failures %d%n", value, parts,
                    batch, mib, rounds, failures);
            System.out.printf(Locale.ROOT, "put p50 %.3f ms, raw write p50 %.3f ms: put/raw rate %.3f (means %.3f)%n",
                    med(put) / 1e6, med(rw) / 1e6, med(rw) / med(put), mean(rw) / mean(put));
            pool.close();
            System.out.printf(Locale.ROOT, "two puts of %d keys at once p50 %.3f ms: rate/raw write %.3f%n", half, med(two) / 1e6,
                    med(rw) / med(two));
            System.out.printf(Locale.ROOT, "get p50 %.3f ms, raw read p50 %.3f ms: get/raw rate %.3f (means %.3f)%n",
                    med(get) / 1e6, med(rr) / 1e6, med(rr) / med(get), mean(rr) / mean(get));
            System.out.printf(Locale.ROOT, "the same steps by hand (public calls, no client code between them), p50: BatchPutStart %.3f ms, "
                    + "engine write %.3f ms, BatchPutEnd %.3f ms; BatchGetReplicaList %.3f ms, engine read %.3f ms%n",
                    med(parts3[0]) / 1e6, med(parts3[1]) / 1e6, med(parts3[2]) / 1e6, med(parts3[3]) / 1e6, med(parts3[4]) / 1e6);
            masterAlone(c, batch, value, rounds);
            afterTransfer(c, target, ls, lr, ln, batch, value, rounds);
            c.batchRemove(rawKeys, true);
        }
        System.out.printf(Locale.ROOT, "load average at end: %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
    }

    static void masterAlone(MooncakeStoreClient c, int batch, long value, int rounds) {
        MasterClient mc = c.master();
        Uuid id = c.clientId();
        long[] lens = new long[batch];
        Arrays.fill(lens, value);
        long[] start = new long[rounds];
        long[] revoke = new long[rounds];
        long[] lookup = new long[rounds];
        long[] ping = new long[rounds];
        List<String> have = keys("have-", batch);
        // objects to look up: started and ended with no bytes written (the lookup does not read them)
        mc.batchPutStart(id, have, lens, ReplicateConfig.defaults());
        mc.batchPutEnd(id, have);
        for (int r = 0; r < rounds; r++) {
            List<String> keys = keys("m" + r + "-", batch);
            long t0 = System.nanoTime();
            mc.batchPutStart(id, keys, lens, ReplicateConfig.defaults());
            long t1 = System.nanoTime();
            mc.batchPutRevoke(id, keys);
            long t2 = System.nanoTime();
            mc.batchGetReplicaList(have);
            long t3 = System.nanoTime();
            mc.ping(id);
            long t4 = System.nanoTime();
            start[r] = t1 - t0;
            revoke[r] = t2 - t1;
            lookup[r] = t3 - t2;
            ping[r] = t4 - t3;
        }
        mc.batchRemove(have, true);
        System.out.printf(Locale.ROOT, "fake master alone, %d keys a call, p50: BatchPutStart %.3f ms, BatchPutRevoke %.3f ms, "
                + "BatchGetReplicaList %.3f ms, Ping %.3f ms%n", batch, med(start) / 1e6, med(revoke) / 1e6, med(lookup) / 1e6,
                med(ping) / 1e6);
    }

    /** The fake master's calls right after a raw write of the batch (what a put's PutEnd and the next PutStart meet). */
    static void afterTransfer(MooncakeStoreClient c, String target, long[] ls, long[] lr, long[] ln, int batch, long value,
            int rounds) {
        MasterClient mc = c.master();
        long[] lens = new long[batch];
        Arrays.fill(lens, value);
        long[] ping = new long[rounds];
        long[] start = new long[rounds];
        for (int r = 0; r < rounds; r++) {
            List<String> keys = keys("t" + r + "-", batch);
            c.engine().batchTransferSyncWrite(target, ls, lr, ln);
            long t0 = System.nanoTime();
            mc.ping(c.clientId());
            long t1 = System.nanoTime();
            c.engine().batchTransferSyncWrite(target, ls, lr, ln);
            long t2 = System.nanoTime();
            mc.batchPutStart(c.clientId(), keys, lens, ReplicateConfig.defaults());
            long t3 = System.nanoTime();
            mc.batchPutRevoke(c.clientId(), keys);
            ping[r] = t1 - t0;
            start[r] = t3 - t2;
        }
        System.out.printf(Locale.ROOT, "fake master right after a raw write of the batch, p50: Ping %.3f ms, BatchPutStart %.3f ms%n",
                med(ping) / 1e6, med(start) / 1e6);
    }

    /** A put and a get done step by step with the master's and the engine's public calls, each step timed. */
    static long[] steps(MooncakeStoreClient c, List<String> keys, long value, long[] ls, long[] ld, long[] ln, int parts) {
        MasterClient mc = c.master();
        int batch = keys.size();
        long[] lens = new long[batch];
        Arrays.fill(lens, value);
        long t0 = System.nanoTime();
        List<Result<List<ReplicaDescriptor>>> st = mc.batchPutStart(c.clientId(), keys, lens, ReplicateConfig.defaults());
        long t1 = System.nanoTime();
        long[] rr = new long[batch * parts];
        String target = st.getFirst().value().getFirst().endpoint();
        for (int i = 0; i < batch; i++) {
            long base = st.get(i).value().getFirst().address();
            for (int p = 0; p < parts; p++) {
                rr[i * parts + p] = base + p * (value / parts);
            }
        }
        long t2 = System.nanoTime();
        int w = c.engine().batchTransferSyncWrite(target, ls, rr, ln);
        long t3 = System.nanoTime();
        mc.batchPutEnd(c.clientId(), keys);
        long t4 = System.nanoTime();
        mc.batchGetReplicaList(keys);
        long t5 = System.nanoTime();
        int rd = c.engine().batchTransferSyncRead(target, ld, rr, ln);
        long t6 = System.nanoTime();
        mc.batchRemove(keys, true);
        if (w != 0 || rd != 0) {
            throw new IllegalStateException("step transfer failed: " + w + " " + rd);
        }
        return new long[] {t1 - t0, t3 - t2, t4 - t3, t5 - t4, t6 - t5};
    }

    static long[] raw(MooncakeStoreClient c, String target, long[] ls, long[] ld, long[] lr, long[] ln) {
        long t0 = System.nanoTime();
        int w = c.engine().batchTransferSyncWrite(target, ls, lr, ln);
        long t1 = System.nanoTime();
        int rd = c.engine().batchTransferSyncRead(target, ld, lr, ln);
        long t2 = System.nanoTime();
        if (w != 0 || rd != 0) {
            throw new IllegalStateException("raw transfer failed: " + w + " " + rd);
        }
        return new long[] {t1 - t0, t2 - t1};
    }

    static List<String> keys(String prefix, int n) {
        List<String> k = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            k.add(prefix + i);
        }
        return k;
    }

    static StoreConfig cfg(FakeMaster m, long segment) {
        return StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(segment).withLocalBufferSize(1L << 20)
                .withTimings(Duration.ofSeconds(10), Duration.ofMillis(500));
    }

    static double med(long[] v) {
        long[] c = v.clone();
        Arrays.sort(c);
        return c[c.length / 2];
    }

    static double mean(long[] v) {
        return Arrays.stream(v).average().orElse(0);
    }
}
