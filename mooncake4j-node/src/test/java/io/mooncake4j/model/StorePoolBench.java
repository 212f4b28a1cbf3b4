package io.mooncake4j.model;

import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimResult;
import io.mooncake4j.sim.StoreKvPool;
import io.mooncake4j.store.FakeMaster;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicaList;
import io.mooncake4j.store.Result;
import io.mooncake4j.store.StoreConfig;
import io.mooncake4j.store.connector.BlockHasher;
import io.mooncake4j.store.connector.KvLayout;
import io.mooncake4j.store.connector.MooncakeStoreConnector;
import io.mooncake4j.store.connector.PoolKeys;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The store connector's figures, not a test (no assertions), same-run ratios on the in-memory
 * {@link FakeMaster} (its data path is the real TCP engine between two clients on loopback):
 * <ul>
 *   <li><b>TTFT</b> of node B for a prompt whose first 1024 tokens node A computed and saved, with the
 *       prefix loaded from the pool vs recomputed by a node without the pool, on a real (Jlama) model
 *       sized so that prefill dominates (hidden 512, 8 layers, context 2048); one token generated,
 *       median of {@code reps} distinct prompts, the two runs of each rep back to back;</li>
 *   <li><b>load rate</b>: {@link MooncakeStoreConnector#load} of {@code blocks} blocks (default 64; 32
 *       layer parts of 32 KiB each, 1 MiB a block) vs the transfer engine's raw read of the same bytes from the same
 *       replica buffers into the same block parts, and the client's {@code batchGetIntoMultiBuffers} alone (after
 *       a lookup of its own), the three taking turns at each position of a round, medians.</li>
 * </ul>
 * Run:
 * <pre>
 * mvn -B -o -q -pl mooncake4j-node test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED --add-modules jdk.incubator.vector -cp mooncake4j-node/target/test-classes:mooncake4j-node/target/classes:$(cat mooncake4j-node/target/test.classpath) \
 *     io.mooncake4j.model.StorePoolBench [reps] [blocks] [load-only]
 * </pre>
 */
public final class StorePoolBench {

    private StorePoolBench() {}

    public static void main(String[] args) throws Exception {
        int reps = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        int loadBlocks = args.length > 1 ? Integer.parseInt(args[1]) : 64;
        boolean loadOnly = args.length > 2 && args[2].equals("load-only");
        System.out.printf(Locale.ROOT, "load average at start: %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
        try (FakeMaster m = new FakeMaster()) {
            loadRate(m, reps * 4, loadBlocks);
            if (!loadOnly) {
                ttft(m, reps);
            }
        }
        System.out.printf(Locale.ROOT, "load average at end: %s%n", Files.readString(Path.of("/proc/loadavg")).trim());
    }

    static StoreConfig store(FakeMaster m, long segment) {
        return StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(segment).withLocalBufferSize(1L << 20)
                .withTimings(Duration.ofSeconds(10), Duration.ofMillis(500));
    }

    static void loadRate(FakeMaster m, int rounds, int blocks) throws Exception {
        int layers = 32;
        long part = 32 << 10;
        try (MooncakeStoreClient holder = MooncakeStoreClient.setup(store(m, 2L * blocks * layers * part + (64L << 20)));
                MooncakeStoreClient user = MooncakeStoreClient.setup(store(m, 0));
                Arena arena = Arena.ofShared()) {
            KvLayout src = layout(arena, layers, part, blocks);
            KvLayout dst = layout(arena, layers, part, blocks);
            BlockHasher h = new BlockHasher(BlockHasher.Algorithm.SHA256, BlockHasher.DEFAULT_SEED);
            PoolKeys ns = PoolKeys.of("", "bench");
            int[] toks = new int[blocks * 16];
            Arrays.setAll(toks, i -> i * 7 + 3);
            List<byte[]> hashes = h.blockHashes(toks, 16);
            int[] ids = new int[blocks];
            Arrays.setAll(ids, i -> i);
            try (MooncakeStoreConnector a = new MooncakeStoreConnector(holder, h, src, MooncakeStoreConnector.Options.singleRank(ns, 16));
                    MooncakeStoreConnector b = new MooncakeStoreConnector(user, h, dst, MooncakeStoreConnector.Options.singleRank(ns, 16))) {
                CompletableFuture<MooncakeStoreConnector.SaveResult> f = new CompletableFuture<>();
                a.save(hashes, ids, 0, blocks, f::complete);
                System.out.println("saved: " + f.get(60, TimeUnit.SECONDS));
                // the raw read: the same bytes from the same replica buffers into the same parts
                List<String> keys = new ArrayList<>();
                for (byte[] x : hashes) {
                    keys.add(ns.key(x));
                }
                List<Result<ReplicaList>> lists = user.master().batchGetReplicaList(keys);
                String target = lists.getFirst().value().replicas().getFirst().endpoint();
                int n = blocks * layers;
                long[] local = new long[n];
                long[] remote = new long[n];
                long[] len = new long[n];
                for (int k = 0; k < blocks; k++) {
                    long base = lists.get(k).value().replicas().getFirst().address();
                    long[] addrs = dst.addresses(ids[k]);
                    for (int l = 0; l < layers; l++) {
                        local[k * layers + l] = addrs[l];
                        remote[k * layers + l] = base + l * part;
                        len[k * layers + l] = part;
                    }
                }
                long[] store = new long[rounds];
                long[] raw = new long[rounds];
                long[] lookup = new long[rounds];
                long[] client = new long[rounds];
                long[][] addrs = new long[blocks][];
                long[][] sizes = new long[blocks][];
                for (int k = 0; k < blocks; k++) {
                    addrs[k] = dst.addresses(ids[k]);
                    sizes[k] = dst.sizes();
                }
                for (int r = 0; r < rounds; r++) {
                    // the three reads take turns at each position (first, second, third) of a round
                    for (int j = 0; j < 3; j++) {
                        switch ((r + j) % 3) {
                            case 0 -> {
                                long t0 = System.nanoTime();
                                MooncakeStoreConnector.LoadResult lr = b.load(hashes, ids, 0, blocks);
                                store[r] = System.nanoTime() - t0;
                                if (lr.loadedBlocks() != blocks) {
                                    throw new IllegalStateException("load failed: " + lr.failedBlocks().length + " blocks");
                                }
                            }
                            case 1 -> raw[r] = rawRead(user, target, local, remote, len);
                            default -> {
                                long t1 = System.nanoTime();
                                user.master().batchGetReplicaList(keys);
                                long t2 = System.nanoTime();
                                user.batchGetIntoMultiBuffers(keys, addrs, sizes);
                                lookup[r] = t2 - t1;
                                client[r] = System.nanoTime() - t2;
                            }
                        }
                    }
                }
                double bytes = (double) blocks * layers * part;
                double s = median(store);
                double w = median(raw);
                System.out.printf(Locale.ROOT, "load %d blocks x %d parts x %d KiB (%.0f MiB), %d rounds: connector load "
                        + "p50 %.2f ms (%.2f GB/s), raw engine read p50 %.2f ms (%.2f GB/s), ratio load rate/raw %.2f; the master's GetReplicaList of the %d keys alone p50 %.2f ms, the client's batchGetIntoMultiBuffers alone p50 %.2f ms%n",
                        blocks, layers, part >> 10, bytes / (1 << 20), rounds, s / 1e6, bytes / s, w / 1e6, bytes / w, w / s,
                        blocks, median(lookup) / 1e6, median(client) / 1e6);
            }
        }
    }

    static long rawRead(MooncakeStoreClient c, String target, long[] local, long[] remote, long[] len) {
        long t0 = System.nanoTime();
        int rc = c.engine().batchTransferSyncRead(target, local, remote, len);
        long t = System.nanoTime() - t0;
        if (rc != 0) {
            throw new IllegalStateException("raw read failed: " + rc);
        }
        return t;
    }

    static KvLayout layout(Arena arena, int layers, long part, int blocks) {
        MemorySegment mem = arena.allocate(layers * part * blocks, 4096);
        List<KvLayout.Region> regions = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            regions.add(new KvLayout.Region(mem.address() + l * part * blocks, part, part));
        }
        return new KvLayout(blocks, regions, List.of(MemoryStorage.of(mem.address(), mem.byteSize(), "cpu:0")));
    }

    static double median(long[] v) {
        long[] c = v.clone();
        Arrays.sort(c);
        return c[c.length / 2];
    }

    static void ttft(FakeMaster m, int reps) throws Exception {
        Path dir = Files.createTempDirectory("store-pool-bench");
        TinyModelWriter.Shape shape = new TinyModelWriter.Shape(512, 8, 8, 2, 1024, 2048, 7);
        TinyModelWriter.write(dir.resolve("m"), shape);
        try (JlamaModel model = JlamaModel.load(dir.resolve("m"), "F32")) {
            JlamaStorePoolTest.modelForBench(model);
            var poolCfg = JlamaStorePoolTest.poolConfig(m.hostPort(), "m", 256L << 20);
            try (SimEngine a = JlamaStorePoolTest.engine("a", StoreKvPool.factory(poolCfg), 128);
                    SimEngine b = JlamaStorePoolTest.engine("b", StoreKvPool.factory(poolCfg), 128);
                    SimEngine fresh = JlamaStorePoolTest.engine("fresh", null, 128)) {
                long[] pool = new long[reps];
                long[] recompute = new long[reps];
                SplittableRandom rnd = new SplittableRandom(3);
                for (int r = -1; r < reps; r++) { // r = -1: warm-up
                    int[] pa = new int[1100];
                    int[] pb = new int[1100];
                    for (int i = 0; i < pa.length; i++) {
                        pa[i] = 3 + rnd.nextInt(model.vocabularySize() - 3);
                        pb[i] = i < 1024 ? pa[i] : 3 + rnd.nextInt(model.vocabularySize() - 3);
                    }
                    pa[0] = 1;
                    pb[0] = 1;
                    a.submit("a" + r, pa, 1, null).get(300, TimeUnit.SECONDS);
                    long want = (r + 2) * 1024L;
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                    while (a.kvPool().counters().get("saved_blocks") < (r + 2) * 68L && System.nanoTime() < deadline) {
                        java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
                    }
                    long t0 = System.nanoTime();
                    SimResult rb = b.submit("b" + r, pb, 1, null).get(300, TimeUnit.SECONDS);
                    long t1 = System.nanoTime();
                    SimResult rf = fresh.submit("f" + r, pb, 1, null).get(300, TimeUnit.SECONDS);
                    long t2 = System.nanoTime();
                    if (!Arrays.equals(rb.outputTokens(), rf.outputTokens())) {
                        throw new IllegalStateException("tokens differ: " + rb + " vs " + rf);
                    }
                    if (r >= 0) {
                        pool[r] = t1 - t0;
                        recompute[r] = t2 - t1;
                    }
                    if (b.kvPool().counters().get("hit_tokens") < want) {
                        System.out.println("note: B's hit tokens " + b.kvPool().counters().get("hit_tokens") + " < " + want);
                    }
                }
                System.out.printf(Locale.ROOT, "TTFT, 1100-token prompt, 1024 shared (64 blocks of 16), model hidden 512 x 8 "
                        + "layers F32, %d reps: pool p50 %.1f ms, recompute p50 %.1f ms, ratio %.3f; B's counters %s%n", reps,
                        median(pool) / 1e6, median(recompute) / 1e6, median(pool) / median(recompute), b.kvPool().counters());
            }
        }
    }
}
