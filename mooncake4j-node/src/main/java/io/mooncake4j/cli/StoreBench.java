package io.mooncake4j.cli;

import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicaDescriptor;
import io.mooncake4j.store.ReplicaList;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.Result;
import io.mooncake4j.store.StoreConfig;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code store bench}: batches of values put and got from registered memory (zero-copy, Mooncake's
 * {@code batch_put_from}/{@code batch_get_into}) for a duration, with operations and bytes per second
 * and batch latency percentiles. With {@code --raw}, thread 0 pairs each store round with a raw
 * round: this client's engine writing and reading the same bytes to the same segment with no master
 * call, so that both rows see the same machine (a shared 2-core VM swings by 2x between phases
 * run one after the other). The raw round goes first in odd rounds and second in even ones, so
 * neither side always finds the caches the other left.
 */
final class StoreBench {

    private StoreBench() {}

    static int run(Flags f, StoreConfig cfg, PrintStream out, PrintStream err) throws Exception {
        long valueSize = f.positiveLong("value-size", 64L << 10);
        int batch = f.positiveInt("batch", 128);
        int threads = f.positiveInt("threads", 1);
        long seconds = f.positiveLong("duration", 10);
        boolean verify = f.bool("verify", false);
        boolean raw = f.bool("raw", false);
        long perThread = valueSize * batch;
        if (cfg.globalSegmentSize() > 0 && perThread * (threads + (raw ? 1 : 0)) * 2 > cfg.globalSegmentSize()) {
            throw new Flags.UsageException(String.format(Locale.ROOT,
                    "--segment-size %d is too small for %d threads x batch %d x %d bytes (twice, for the removals)",
                    cfg.globalSegmentSize(), threads + (raw ? 1 : 0), batch, valueSize));
        }
        // keys of this run only: other clients' objects in a shared pool are never touched
        String prefix = String.format(Locale.ROOT, "bench-%08x-", new java.security.SecureRandom().nextInt());
        try (MooncakeStoreClient c = MooncakeStoreClient.setup(cfg); Arena arena = Arena.ofShared()) {
            out.printf(Locale.ROOT, "store bench: keys %s*, removed after each round; no other key is touched%n", prefix);
            MemorySegment src = arena.allocate(perThread * threads, 4096);
            MemorySegment dst = arena.allocate(perThread * threads, 4096);
            for (long i = 0; i < src.byteSize(); i += 8) {
                src.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            if (c.registerBuffer(src.address(), src.byteSize()) != 0 || c.registerBuffer(dst.address(), dst.byteSize()) != 0) {
                err.println("store bench: cannot register the buffers");
                return 1;
            }
            RawTarget rawTarget = raw ? RawTarget.place(c, prefix, src, dst, batch, valueSize, out) : null;
            StoreCommand.Phase put = new StoreCommand.Phase("put");
            StoreCommand.Phase get = new StoreCommand.Phase("get");
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
                            keys.add(prefix + tid + "-" + round + "-" + i);
                        }
                        boolean rawFirst = (round & 1) == 1;
                        if (tid == 0 && rawTarget != null && rawFirst) {
                            rawTarget.round();
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
                        c.batchRemove(keys, true);
                        if (tid == 0 && rawTarget != null && !rawFirst) {
                            rawTarget.round();
                        }
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
            if (rawTarget != null) {
                rawTarget.print(out, put, get);
                if (rawTarget.failed > 0) {
                    failures.incrementAndGet();
                }
                c.batchRemove(rawTarget.keys, true);
            }
            timeExists(c, prefix, out);
            return failures.get() == 0 ? 0 : 1;
        }
    }

    /**
     * The raw rows' target: one batch put through the store, its replicas' (endpoint, address) taken
     * from the master, and raw transfers aimed at exactly those buffers while the objects hold them,
     * so the raw and the store rows move the same bytes into the same segment (another process's
     * when the bench contributes none). Used by thread 0 only.
     */
    private static final class RawTarget {
        final MooncakeStoreClient c;
        final List<String> keys;
        final String target;
        final long[] s;
        final long[] d;
        final long[] r;
        final long[] n;
        final LatencyHistogram hw = new LatencyHistogram();
        final LatencyHistogram hr = new LatencyHistogram();
        long sumWrite;
        long sumRead;
        long failed;

        private RawTarget(MooncakeStoreClient c, List<String> keys, String target, long[] s, long[] d, long[] r, long[] n) {
            this.c = c;
            this.keys = keys;
            this.target = target;
            this.s = s;
            this.d = d;
            this.r = r;
            this.n = n;
        }

        /** {@return the target, or null (said on {@code out}) when the batch cannot be placed in one segment} */
        static RawTarget place(MooncakeStoreClient c, String prefix, MemorySegment src, MemorySegment dst, int batch, long valueSize,
                PrintStream out) {
            long[] s = new long[batch];
            long[] d = new long[batch];
            long[] r = new long[batch];
            long[] n = new long[batch];
            List<String> keys = new ArrayList<>(batch);
            for (int i = 0; i < batch; i++) {
                s[i] = src.address() + i * valueSize;
                d[i] = dst.address() + i * valueSize;
                n[i] = valueSize;
                keys.add(prefix + "raw-" + i);
            }
            int[] pr = c.batchPutFrom(keys, s, n, ReplicateConfig.defaults());
            List<Result<ReplicaList>> lists = c.master().batchGetReplicaList(keys);
            String target = null;
            for (int i = 0; i < batch; i++) {
                ReplicaDescriptor rep = pr[i] == 0 && lists.get(i).ok() ? lists.get(i).value().replicas().getFirst() : null;
                if (rep == null || target != null && !target.equals(rep.endpoint())) {
                    out.printf(Locale.ROOT, "raw: the raw batch is not in one segment (put rc %d, %s); raw rows skipped%n",
                            pr[i], lists.get(i));
                    c.batchRemove(keys, true);
                    return null;
                }
                target = rep.endpoint();
                r[i] = rep.address();
            }
            return new RawTarget(c, keys, target, s, d, r, n);
        }

        void round() {
            long t0 = System.nanoTime();
            int w = c.engine().batchTransferSyncWrite(target, s, r, n);
            long t1 = System.nanoTime();
            int rd = c.engine().batchTransferSyncRead(target, d, r, n);
            long t2 = System.nanoTime();
            failed += (w != 0 ? 1 : 0) + (rd != 0 ? 1 : 0);
            hw.record(t1 - t0);
            hr.record(t2 - t1);
            sumWrite += t1 - t0;
            sumRead += t2 - t1;
        }

        void print(PrintStream out, StoreCommand.Phase put, StoreCommand.Phase get) {
            StoreCommand.Phase w = new StoreCommand.Phase("raw write");
            w.add(hw, sumWrite);
            StoreCommand.Phase rd = new StoreCommand.Phase("raw read");
            rd.add(hr, sumRead);
            int batch = n.length;
            w.print(out, batch, n[0], 1);
            rd.print(out, batch, n[0], 1);
            out.printf(Locale.ROOT, "raw target %s (%s), paired with thread 0's store rounds, failed batches %d%n",
                    target, target.equals(c.endpoint()) ? "this process's own segment: a local copy"
                            : "another process's segment, over TCP", failed);
            out.printf(Locale.ROOT, "ratio store/raw: put %.2f (p50 %.2f), get %.2f (p50 %.2f)%n",
                    w.busySeconds() / put.busySeconds() * put.batches() / Math.max(1, w.batches()),
                    w.p50() / put.p50(), rd.busySeconds() / get.busySeconds() * get.batches() / Math.max(1, rd.batches()),
                    rd.p50() / get.p50());
        }
    }

    private static void timeExists(MooncakeStoreClient c, String prefix, PrintStream out) {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            keys.add(prefix + "exists-probe-" + i);
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
