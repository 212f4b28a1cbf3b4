package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.store.FakeMaster;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.StoreConfig;
import io.mooncake4j.store.connector.BlockHasher;
import io.mooncake4j.store.connector.PoolKeys;
import io.mooncake4j.store.connector.StoreConnectorConfig;
import io.mooncake4j.sim.KvPool;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimResult;
import io.mooncake4j.sim.SimWorker;
import io.mooncake4j.sim.StoreKvPool;
import io.mooncake4j.testlog.LogCapture;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fleet's KV pool in the serving path, on the real (tiny) model: node A serves a prompt and saves
 * its blocks into Mooncake Store; node B, on the same master, serves a prompt sharing A's first 272
 * tokens, loads those 17 blocks from the pool, computes only the rest, and its greedy tokens equal a
 * fresh single node's. Then the bad days: the master silent, the holder gone, another model's keys.
 * CI runs it on the in-memory {@link FakeMaster}; with {@code MOONCAKE_MASTER} naming a
 * {@code mooncake_master} binary the same claim runs against it ({@link #realMaster}).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class JlamaStorePoolTest {

    private static final int BLOCK = 16;
    private static final int BLOCKS = 64;
    private static final int DECODE = 8;
    private static final int SHARED = 272;

    @TempDir
    static Path dir;
    private static JlamaModel model;

    @BeforeAll
    static void makeModel() {
        TinyModelWriter.write(dir.resolve("tiny"), TinyModelWriter.Shape.tiny());
        model = JlamaModel.load(dir.resolve("tiny"), "F32");
    }

    @AfterAll
    static void closeModel() {
        if (model != null) {
            model.close();
        }
    }

    /** A worker with no P2P transfers: the store pool is this engine's only connector. */
    static final class NoTransfers implements SimWorker {
        @Override
        public void startLoadKv(MooncakeConnectorMetadata metadata) {}

        @Override
        public TransferResults getTransferResults() {
            return TransferResults.EMPTY;
        }

        @Override
        public Set<Integer> getBlockIdsWithLoadErrors() {
            return Set.of();
        }

        @Override
        public Optional<MooncakeKvConnectorStats> getKvConnectorStats() {
            return Optional.empty();
        }

        @Override
        public void close() {}
    }

    static MooncakeConnectorConfig engineConfig(String id) {
        return MooncakeConnectorConfig.builder().protocol("tcp").hostname("127.0.0.1").kvRole(KvRole.KV_BOTH)
                .engineId(id).tp(0, 1).build();
    }

    static StoreConnectorConfig poolConfig(String master, String modelName, long segment) {
        StoreConfig store = StoreConfig.loopback(master).withGlobalSegmentSize(segment).withLocalBufferSize(1L << 20)
                .withTimings(Duration.ofSeconds(2), Duration.ofMillis(100));
        return new StoreConnectorConfig("kv_both", store, new BlockHasher(BlockHasher.Algorithm.SHA256,
                BlockHasher.DEFAULT_SEED), PoolKeys.of("", modelName), null);
    }

    static SimEngine engine(String id, KvPool.Factory pool) {
        return engine(id, pool, BLOCKS);
    }

    static SimEngine engine(String id, KvPool.Factory pool, int blocks) {
        if (pool == null) {
            return SimEngine.start(engineConfig(id), new JlamaStepModel(model), BLOCK, blocks,
                    SimEngine.Limits.defaults(), (cfg, caches) -> new NoTransfers(), SimEngine.KvPlacement.host());
        }
        return SimEngine.start(engineConfig(id), new JlamaStepModel(model), BLOCK, blocks, SimEngine.Limits.defaults(),
                (cfg, caches) -> new NoTransfers(), SimEngine.KvPlacement.host(), pool);
    }

    /** {@link StorePoolBench}: the engines it starts run {@code m}. */
    static void modelForBench(JlamaModel m) {
        model = m;
    }

    static int[] prompt(long seed, int n) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] t = new int[n];
        t[0] = TinyModelWriter.BOS;
        for (int i = 1; i < n; i++) {
            t[i] = 3 + r.nextInt(model.vocabularySize() - 3);
        }
        return t;
    }

    /** B's prompt: A's first {@link #SHARED} tokens, then its own. */
    static int[] sharing(int[] a, long seed, int n) {
        int[] b = prompt(seed, n);
        System.arraycopy(a, 0, b, 0, SHARED);
        return b;
    }

    static SimResult serve(SimEngine e, String id, int[] prompt) throws Exception {
        SimResult r = e.submit(id, prompt, DECODE, null).get(120, TimeUnit.SECONDS);
        assertTrue(r.ok(), r.toString());
        return r;
    }

    static long counter(SimEngine e, String name) {
        return e.kvPool().counters().get(name);
    }

    static void await(LongSupplier v, long atLeast, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (v.getAsLong() < atLeast) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what + " >= " + atLeast + " (is " + v.getAsLong() + ")");
            }
            LockSupport.parkNanos(1_000_000); // polls a counter another thread raises, bounded by the deadline
        }
    }

    /** The claim, on any master: B loads A's prefix blocks and decodes the tokens a fresh node decodes. */
    static void sharedPrefixClaim(String master) throws Exception {
        int[] a = prompt(1, 320);
        int[] b = sharing(a, 2, 330);
        try (SimEngine fresh = engine("fresh", null);
                SimEngine nodeA = engine("a", StoreKvPool.factory(poolConfig(master, "tiny", 64L << 20)));
                SimEngine nodeB = engine("b", StoreKvPool.factory(poolConfig(master, "tiny", 64L << 20)))) {
            int[] expected = serve(fresh, "fresh-b", b).outputTokens();
            serve(nodeA, "a-1", a);
            await(() -> counter(nodeA, "saved_blocks"), a.length / BLOCK, "A's saved blocks");
            SimResult rb = serve(nodeB, "b-1", b);
            assertEquals(0, rb.localHitTokens(), "B's own prefix cache is empty");
            assertEquals(SHARED, counter(nodeB, "hit_tokens"), "B loaded A's 17 shared blocks");
            assertEquals(0, counter(nodeB, "load_error_blocks"));
            assertArrayEquals(expected, rb.outputTokens(), "B's greedy tokens equal a fresh node's");
            // B saved its own new blocks; the shared ones were present already
            await(() -> counter(nodeB, "saved_blocks") + counter(nodeB, "save_existing_blocks"), b.length / BLOCK,
                    "B's saves");
            assertTrue(counter(nodeB, "save_existing_blocks") >= SHARED / BLOCK, nodeB.kvPool().counters().toString());
        }
    }

    @Test
    void nodeBLoadsNodeAsPrefixFromThePoolAndDecodesTheSameTokens() throws Exception {
        try (FakeMaster m = new FakeMaster()) {
            sharedPrefixClaim(m.hostPort());
        }
    }

    @Test
    void realMaster() throws Exception {
        String bin = System.getenv("MOONCAKE_MASTER");
        Assumptions.assumeTrue(bin != null && !bin.isBlank() && java.nio.file.Files.isExecutable(Path.of(bin)),
                "MOONCAKE_MASTER does not name a mooncake_master binary: the real-master run is skipped");
        int port;
        int metrics;
        try (java.net.ServerSocket s1 = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress());
                java.net.ServerSocket s2 = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s1.getLocalPort();
            metrics = s2.getLocalPort();
        }
        Path log = dir.resolve("master.log");
        Process master = new ProcessBuilder(bin, "--rpc_address=127.0.0.1", "--rpc_port=" + port,
                "--metrics_host=127.0.0.1", "--metrics_port=" + metrics, "--enable_http_metadata_server=false",
                "--logtostderr=true").redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            String address = "127.0.0.1:" + port;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                try (MooncakeStoreClient probe = MooncakeStoreClient.setup(poolConfig(address, "probe", 0).store())) {
                    break;
                } catch (RuntimeException e) {
                    if (!master.isAlive() || System.nanoTime() > deadline) {
                        throw new AssertionError("mooncake_master did not come up: " + e, e);
                    }
                    LockSupport.parkNanos(50_000_000L); // polling a child process's port: no event to wait for
                }
            }
            sharedPrefixClaim(address);
        } finally {
            master.destroy();
            if (!master.waitFor(10, TimeUnit.SECONDS)) {
                master.destroyForcibly();
            }
        }
    }

    @Test
    void theLoadedKvIsWhatDecidesTheTokens() throws Exception {
        // the pool's bytes are used: a pool holding another model's KV under this model's name changes B's tokens
        JlamaModel other = JlamaModel.load(writeOther(), "F32");
        int[] a = prompt(3, 320);
        int[] b = sharing(a, 4, 330);
        try (FakeMaster m = new FakeMaster();
                SimEngine fresh = engine("fresh", null);
                SimEngine nodeA = SimEngine.start(engineConfig("a-other"), new JlamaStepModel(other), BLOCK, BLOCKS,
                        SimEngine.Limits.defaults(), (cfg, caches) -> new NoTransfers(), SimEngine.KvPlacement.host(),
                        StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 64L << 20)));
                SimEngine nodeB = engine("b", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 64L << 20)))) {
            int[] expected = serve(fresh, "fresh-b", b).outputTokens();
            serve(nodeA, "a-1", a);
            await(() -> counter(nodeA, "saved_blocks"), a.length / BLOCK, "A's saved blocks");
            SimResult rb = serve(nodeB, "b-1", b);
            assertEquals(SHARED, counter(nodeB, "hit_tokens"));
            assertFalse(Arrays.equals(expected, rb.outputTokens()), "foreign KV under our keys changes the tokens");
        } finally {
            other.close();
        }
    }

    private static Path writeOther() {
        Path p = dir.resolve("tiny-other");
        if (!p.toFile().exists()) {
            TinyModelWriter.write(p, TinyModelWriter.Shape.tiny().withSeed(99));
        }
        return p;
    }

    @Test
    void anotherModelsKeysMiss() throws Exception {
        int[] a = prompt(5, 320);
        int[] b = sharing(a, 6, 330);
        try (FakeMaster m = new FakeMaster();
                SimEngine fresh = engine("fresh", null);
                SimEngine nodeA = engine("a", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny-other-model", 64L << 20)));
                SimEngine nodeB = engine("b", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 64L << 20)))) {
            int[] expected = serve(fresh, "fresh-b", b).outputTokens();
            serve(nodeA, "a-1", a);
            await(() -> counter(nodeA, "saved_blocks"), a.length / BLOCK, "A's saved blocks");
            SimResult rb = serve(nodeB, "b-1", b);
            assertEquals(0, counter(nodeB, "hit_tokens"), "the namespace makes them miss");
            assertEquals(0, counter(nodeB, "loaded_blocks"));
            assertArrayEquals(expected, rb.outputTokens());
        }
    }

    @Test
    void aSilentMasterCostsTheHitNeverTheRequest() throws Exception {
        int[] a = prompt(7, 320);
        int[] b = sharing(a, 8, 330);
        try (FakeMaster m = new FakeMaster();
                SimEngine fresh = engine("fresh", null);
                SimEngine nodeA = engine("a", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 64L << 20)));
                SimEngine nodeB = engine("b", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 0)));
                LogCapture logs = LogCapture.start()) {
            int[] expectedB = serve(fresh, "fresh-b", b).outputTokens();
            serve(nodeA, "a-1", a);
            await(() -> counter(nodeA, "saved_blocks"), a.length / BLOCK, "A's saved blocks");
            // the master stops answering: the lookup runs into the RPC deadline, the hit is 0, the request is served
            m.silent(true);
            SimResult rb = serve(nodeB, "b-1", b);
            assertArrayEquals(expectedB, rb.outputTokens());
            assertTrue(counter(nodeB, "lookup_errors") >= 1, nodeB.kvPool().counters().toString());
            assertEquals(0, counter(nodeB, "hit_tokens"));
            m.silent(false);
        }
    }

    @Test
    void aDeadHolderMeansLoadErrorsAndTheBlocksAreComputed() throws Exception {
        int[] a = prompt(10, 320);
        int[] c = sharing(a, 11, 340);
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient holder = MooncakeStoreClient.setup(poolConfig(m.hostPort(), "tiny", 64L << 20).store());
                SimEngine fresh = engine("fresh", null);
                SimEngine nodeA = engine("a", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 0), holder));
                SimEngine nodeB = engine("b", StoreKvPool.factory(poolConfig(m.hostPort(), "tiny", 0)));
                LogCapture logs = LogCapture.start()) {
            int[] expectedC = serve(fresh, "fresh-c", c).outputTokens();
            serve(nodeA, "a-1", a);
            await(() -> counter(nodeA, "saved_blocks"), a.length / BLOCK, "A's saved blocks");
            assertTrue(m.keys().size() >= a.length / BLOCK, m.keys().toString());
            // the holder's engine dies (its segment unreachable, the master still lists the blocks): B's lookup hits,
            // every load fails, B computes the blocks itself and decodes the same tokens
            holder.engine().close();
            SimResult rc = serve(nodeB, "c-1", c);
            assertArrayEquals(expectedC, rc.outputTokens());
            assertEquals(SHARED / BLOCK, counter(nodeB, "load_error_blocks"), nodeB.kvPool().counters().toString());
            assertEquals(0, counter(nodeB, "hit_tokens"));
            assertEquals(SHARED, counter(nodeB, "recomputed_tokens_after_load_error"));
        }
    }
}
