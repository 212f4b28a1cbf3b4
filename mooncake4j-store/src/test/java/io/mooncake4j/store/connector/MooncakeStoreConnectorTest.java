package io.mooncake4j.store.connector;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.store.FakeMaster;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.StoreConfig;
import io.mooncake4j.testlog.LogCapture;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * The connector's lookup, load and save through the real {@link MooncakeStoreClient} and its TCP engine
 * against the in-memory {@link FakeMaster} on a real socket, and its bad days: the master down, a
 * holder gone mid-load, a short object, the pool full, keys of another model.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MooncakeStoreConnectorTest {

    static final int BS = 16;
    static final int BLOCKS = 8;
    /** Two layers of 512 bytes per block each: a block's value is 1 KiB in two parts. */
    static final long LAYER_BLOCK = 512;

    static StoreConfig config(FakeMaster m, long segment) {
        return StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(segment).withLocalBufferSize(1L << 20)
                .withTimings(Duration.ofSeconds(2), Duration.ofMillis(100));
    }

    /** Host "KV caches": two layer regions of {@link #BLOCKS} blocks. */
    record Kv(MemorySegment mem, KvLayout layout) {
        static Kv allocate(Arena arena) {
            MemorySegment mem = arena.allocate(2 * BLOCKS * LAYER_BLOCK, 4096);
            MemoryStorage s = MemoryStorage.of(mem.address(), mem.byteSize(), "cpu:0");
            List<KvLayout.Region> regions = List.of(new KvLayout.Region(mem.address(), LAYER_BLOCK, LAYER_BLOCK),
                    new KvLayout.Region(mem.address() + BLOCKS * LAYER_BLOCK, LAYER_BLOCK, LAYER_BLOCK));
            return new Kv(mem, new KvLayout(BLOCKS, regions, List.of(s)));
        }

        void fill(int block, int seed) {
            for (int layer = 0; layer < 2; layer++) {
                long off = layer * BLOCKS * LAYER_BLOCK + block * LAYER_BLOCK;
                for (int i = 0; i < LAYER_BLOCK; i++) {
                    mem.set(ValueLayout.JAVA_BYTE, off + i, (byte) (seed * 31 + layer * 7 + i));
                }
            }
        }

        byte[] block(int block) {
            byte[] out = new byte[(int) (2 * LAYER_BLOCK)];
            for (int layer = 0; layer < 2; layer++) {
                MemorySegment.copy(mem, ValueLayout.JAVA_BYTE, layer * BLOCKS * LAYER_BLOCK + block * LAYER_BLOCK, out,
                        (int) (layer * LAYER_BLOCK), (int) LAYER_BLOCK);
            }
            return out;
        }
    }

    static final BlockHasher HASHER = new BlockHasher(BlockHasher.Algorithm.SHA256, BlockHasher.DEFAULT_SEED);
    static final PoolKeys NS = PoolKeys.of("", "Qwen3-0.6B");

    static MooncakeStoreConnector connector(MooncakeStoreClient c, Kv kv, PoolKeys ns) {
        return new MooncakeStoreConnector(c, HASHER, kv.layout(), MooncakeStoreConnector.Options.singleRank(ns, BS));
    }

    static int[] tokens(int n, int seed) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = (seed * 7919 + i * 104729) % 151000;
        }
        return t;
    }

    static MooncakeStoreConnector.SaveResult saveNow(MooncakeStoreConnector c, List<byte[]> h, int[] ids, int from, int to)
            throws Exception {
        CompletableFuture<MooncakeStoreConnector.SaveResult> f = new CompletableFuture<>();
        c.save(h, ids, from, to, f::complete);
        return f.get(30, TimeUnit.SECONDS);
    }

    static void await(BooleanSupplier cond, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000); // polls the store, bounded by the deadline
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void lookupFindsExactlyTheBlocksPutUnderVllmComputedKeys() throws Exception {
        Map<String, Object> golden;
        try (InputStream in = getClass().getResourceAsStream("/vllm-store/keys.json")) {
            golden = Json.parseObject(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
        Map<String, Object> chain = ((List<Map<String, Object>>) golden.get("chains")).get(0); // sha256, default seed, bs 16
        int[] toks = ((List<Object>) chain.get("tokens")).stream().mapToInt(o -> ((Number) o).intValue()).toArray();
        List<Object> vllmHashes = (List<Object>) chain.get("block_hashes");
        String vllmKey0 = (String) ((List<Map<String, Object>>) golden.get("keys")).get(0).get("key");
        String vllmPrefix = vllmKey0.substring(0, vllmKey0.lastIndexOf('@') + 1);
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient holder = MooncakeStoreClient.setup(config(m, 8L << 20));
                MooncakeStoreClient user = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared()) {
            // a "Python node" put blocks 0..2 of the 4 under the keys vLLM computed
            for (int b = 0; b < 3; b++) {
                assertEquals(0, holder.put(vllmPrefix + vllmHashes.get(b), new byte[(int) (2 * LAYER_BLOCK)],
                        ReplicateConfig.defaults()));
            }
            Kv kv = Kv.allocate(arena);
            try (MooncakeStoreConnector c = connector(user, kv, NS)) {
                List<byte[]> ours = HASHER.blockHashes(toks, BS);
                assertEquals(48, c.lookup(toks.length, ours), "the three blocks put, the fourth absent");
                int[] other = toks.clone();
                other[40] ^= 1; // block 2 differs: its hash and every later one
                assertEquals(32, c.lookup(other.length, HASHER.blockHashes(other, BS)));
                assertEquals(32, c.lookup(48, ours), "a full hit is cut back: the last token is computed");
                // the same tokens under sha256_cbor are other keys: a miss
                BlockHasher cbor = new BlockHasher(BlockHasher.Algorithm.SHA256_CBOR, BlockHasher.DEFAULT_SEED);
                assertEquals(0, c.lookup(toks.length, cbor.blockHashes(toks, BS)));
            }
        }
    }

    @Test
    void savedBlocksLoadIntoAnotherNodesBlocksAndDuplicatesAreSkipped() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 8L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared()) {
            Kv kvA = Kv.allocate(arena);
            Kv kvB = Kv.allocate(arena);
            int[] toks = tokens(5 * BS + 3, 1);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            int[] idsA = {3, 1, 4, 0, 5};
            for (int i = 0; i < 5; i++) {
                kvA.fill(idsA[i], 100 + i);
            }
            try (MooncakeStoreConnector ca = connector(a, kvA, NS); MooncakeStoreConnector cb = connector(b, kvB, NS)) {
                assertEquals(new MooncakeStoreConnector.SaveResult(5, 0, 0, 0), saveNow(ca, h, idsA, 0, 5));
                assertEquals(new MooncakeStoreConnector.SaveResult(0, 5, 0, 0), saveNow(ca, h, idsA, 0, 5),
                        "keys already present are skipped");
                assertEquals(5 * BS, cb.lookup(toks.length, h));
                int[] idsB = {7, 6, 2, 1, 0};
                MooncakeStoreConnector.LoadResult r = cb.load(h, idsB, 1, 5);
                assertEquals(4, r.loadedBlocks());
                assertEquals(0, r.failedBlocks().length);
                for (int i = 1; i < 5; i++) {
                    assertArrayEquals(kvA.block(idsA[i]), kvB.block(idsB[i]), "block " + i);
                }
                assertEquals(4 * 2 * LAYER_BLOCK, cb.stats().loadBytes());
                assertEquals(5, ca.stats().saveBlocks());
                assertEquals(5, ca.stats().saveExisting());
            }
        }
    }

    @Test
    void keysOfAnotherModelOrLayoutMissAndAreNeverLoaded() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 8L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared()) {
            Kv kvA = Kv.allocate(arena);
            Kv kvB = Kv.allocate(arena);
            int[] toks = tokens(3 * BS, 2);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            kvA.fill(0, 9);
            kvA.fill(1, 10);
            kvA.fill(2, 11);
            try (MooncakeStoreConnector ca = connector(a, kvA, PoolKeys.of("", "other-model"));
                    MooncakeStoreConnector tp = new MooncakeStoreConnector(a, HASHER, kvA.layout(),
                            new MooncakeStoreConnector.Options(new PoolKeys("", "Qwen3-0.6B", 1, 0, 0, 0, 0), 1,
                                    NS.lookupNamespaces(2, 1, 1, 1, 1), 1, BS, null, true, 8, Duration.ofSeconds(10)));
                    MooncakeStoreConnector cb = connector(b, kvB, NS)) {
                assertEquals(3, saveNow(ca, h, new int[] {0, 1, 2}, 0, 3).saved());
                assertEquals(0, cb.lookup(toks.length + 1, h), "another model's keys miss");
                // rank 1 of a TP-2 layout saved its shard: our single-rank namespace (tp_rank 0) does not see it
                assertEquals(3, saveNow(tp, h, new int[] {0, 1, 2}, 0, 3).saved());
                assertEquals(0, cb.lookup(toks.length + 1, h), "another layout's shard misses");
                // and the TP-2 lookup needs both shards: rank 0's is absent
                assertEquals(0, tp.lookup(toks.length + 1, h));
                byte[] before = kvB.block(0);
                MooncakeStoreConnector.LoadResult r = cb.load(h, new int[] {0, 1, 2}, 0, 3);
                assertEquals(0, r.loadedBlocks());
                assertEquals(3, r.failedBlocks().length);
                assertArrayEquals(before, kvB.block(0), "a miss writes nothing");
            }
        }
    }

    @Test
    void aShortOrCorruptedObjectIsALoadErrorAndNothingIsWrittenOutsideItsBlock() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 8L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared();
                LogCapture logs = LogCapture.start(MooncakeStoreConnector.class)) {
            Kv kvA = Kv.allocate(arena);
            Kv kvB = Kv.allocate(arena);
            int[] toks = tokens(3 * BS, 3);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            for (int i = 0; i < 3; i++) {
                kvA.fill(i, 20 + i);
            }
            for (int i = 0; i < BLOCKS; i++) {
                kvB.fill(i, 90 + i);
            }
            try (MooncakeStoreConnector ca = connector(a, kvA, NS); MooncakeStoreConnector cb = connector(b, kvB, NS)) {
                assertEquals(0, a.put(NS.key(h.get(0)), new byte[100], ReplicateConfig.defaults()), "a short object");
                assertEquals(0, a.put(NS.key(h.get(1)), new byte[(int) (3 * LAYER_BLOCK)], ReplicateConfig.defaults()),
                        "an object longer than a block");
                assertEquals(1, saveNow(ca, h, new int[] {0, 1, 2}, 0, 3).saved(), "blocks 0 and 1 exist (skipped)");
                List<byte[]> neighbours = new ArrayList<>();
                for (int i = 0; i < BLOCKS; i++) {
                    neighbours.add(kvB.block(i));
                }
                MooncakeStoreConnector.LoadResult r = cb.load(h, new int[] {4, 5, 6}, 0, 3);
                assertEquals(0, r.loadedBlocks(), "block 0 is bad: no usable prefix");
                assertArrayEquals(new int[] {4, 5}, r.failedBlocks());
                assertArrayEquals(kvA.block(2), kvB.block(6), "the good block arrived");
                for (int i = 0; i < BLOCKS; i++) {
                    if (i != 4 && i != 5 && i != 6) {
                        assertArrayEquals(neighbours.get(i), kvB.block(i), "block " + i + " untouched");
                    }
                }
                assertEquals(2, cb.stats().loadErrorBlocks());
                logs.assertLogged(Level.WARN, "returned 100 bytes");
            }
        }
    }

    @Test
    void masterDownMeansAMissAndFailedLoadsAndSavesAreCounted() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 8L << 20));
                Arena arena = Arena.ofShared();
                LogCapture logs = LogCapture.start()) {
            Kv kv = Kv.allocate(arena);
            int[] toks = tokens(3 * BS, 4);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            try (MooncakeStoreConnector c = connector(a, kv, NS)) {
                assertEquals(3, saveNow(c, h, new int[] {0, 1, 2}, 0, 3).saved());
                assertEquals(2 * BS, c.lookup(toks.length, h));
                m.silent(true); // the master stops answering: every call runs into the client's RPC deadline
                assertEquals(0, c.lookup(toks.length + 1, h));
                assertTrue(c.stats().lookupErrors() >= 1);
                MooncakeStoreConnector.LoadResult r = c.load(h, new int[] {5, 6, 7}, 0, 3);
                assertEquals(0, r.loadedBlocks());
                assertEquals(3, r.failedBlocks().length);
                MooncakeStoreConnector.SaveResult s = saveNow(c, HASHER.blockHashes(tokens(2 * BS, 5), BS),
                        new int[] {0, 1}, 0, 2);
                assertEquals(0, s.saved());
                assertTrue(c.stats().saveErrors() >= 1, c.stats().toString());
                m.silent(false);
                m.restart(); // back, but empty: a miss; the client remounts and saving resumes
                assertEquals(0, c.lookup(toks.length + 1, h));
                await(() -> {
                    try {
                        return saveNow(c, h, new int[] {0, 1, 2}, 0, 3).saved() == 3;
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                }, "saves after the master restarted");
                assertEquals(2 * BS, c.lookup(toks.length, h));
            }
        }
    }

    @Test
    void aHolderKilledBeforeTheLoadIsALoadErrorNotAHang() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient user = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared()) {
            Kv kvA = Kv.allocate(arena);
            Kv kvB = Kv.allocate(arena);
            int[] toks = tokens(4 * BS, 6);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            MooncakeStoreClient holder = MooncakeStoreClient.setup(config(m, 8L << 20));
            try (MooncakeStoreConnector ca = connector(holder, kvA, NS); MooncakeStoreConnector cb = connector(user, kvB, NS)) {
                assertEquals(4, saveNow(ca, h, new int[] {0, 1, 2, 3}, 0, 4).saved());
                assertEquals(3 * BS, cb.lookup(toks.length, h));
                // the holder dies without unmounting (its engine stops serving reads); the master still lists the replicas
                holder.engine().close();
                MooncakeStoreConnector.LoadResult r = cb.load(h, new int[] {4, 5, 6}, 0, 3);
                assertEquals(0, r.loadedBlocks());
                assertEquals(3, r.failedBlocks().length);
                assertEquals(3, cb.stats().loadErrorBlocks());
            } finally {
                holder.close();
            }
        }
    }

    @Test
    void aFullPoolIsBackpressureNotAnError() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 2 * 2 * LAYER_BLOCK));
                Arena arena = Arena.ofShared()) {
            Kv kv = Kv.allocate(arena);
            int[] toks = tokens(6 * BS, 7);
            List<byte[]> h = HASHER.blockHashes(toks, BS);
            try (MooncakeStoreConnector c = connector(a, kv, NS)) {
                MooncakeStoreConnector.SaveResult s = saveNow(c, h, new int[] {0, 1, 2, 3, 4, 5}, 0, 6);
                assertTrue(s.backpressure() > 0, s.toString());
                assertTrue(s.saved() <= 2, s.toString());
                assertEquals(0, s.failed(), s.toString());
                assertEquals(s.backpressure(), c.stats().saveBackpressure());
                // saving pauses for a moment after the pool said full: the next save is skipped as backpressure too
                MooncakeStoreConnector.SaveResult next = saveNow(c, h, new int[] {0, 1, 2, 3, 4, 5}, 0, 6);
                assertEquals(0, next.saved() + next.failed(), next.toString());
            }
        }
    }

    @Test
    void saveQueueIsBoundedAndCloseDrains() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 8L << 20));
                Arena arena = Arena.ofShared()) {
            Kv kv = Kv.allocate(arena);
            MooncakeStoreConnector c = new MooncakeStoreConnector(a, HASHER, kv.layout(),
                    new MooncakeStoreConnector.Options(NS, 0, List.of(NS), 1, BS, null, true, 1, Duration.ofSeconds(30)));
            m.silent(true); // the first save blocks in the store until the master answers again
            CompletableFuture<MooncakeStoreConnector.SaveResult> first = new CompletableFuture<>();
            List<byte[]> h = HASHER.blockHashes(tokens(2 * BS, 8), BS);
            assertTrue(c.save(h, new int[] {0, 1}, 0, 2, first::complete));
            CompletableFuture<MooncakeStoreConnector.SaveResult> second = new CompletableFuture<>();
            assertFalse(c.save(h, new int[] {0, 1}, 0, 2, second::complete), "one pending at most");
            assertTrue(second.isDone(), "a refused save is told at once (its blocks are released)");
            assertEquals(2, c.stats().saveSkipped());
            m.silent(false);
            assertTrue(c.closeAndDrain(), "close waits for the running save");
            assertTrue(first.isDone());
            assertFalse(c.save(h, new int[] {0, 1}, 0, 2, r -> { }), "closed");
        }
    }

    @Test
    void badRangesAreRefused() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 1L << 20));
                Arena arena = Arena.ofShared()) {
            Kv kv = Kv.allocate(arena);
            try (MooncakeStoreConnector c = connector(a, kv, NS)) {
                List<byte[]> h = HASHER.blockHashes(tokens(2 * BS, 9), BS);
                org.junit.jupiter.api.Assertions.assertThrows(IndexOutOfBoundsException.class,
                        () -> c.load(h, new int[] {0, 1}, 0, 3));
                org.junit.jupiter.api.Assertions.assertThrows(IndexOutOfBoundsException.class,
                        () -> c.load(h, new int[] {0, BLOCKS}, 0, 2));
                assertEquals(0, c.lookup(BS - 1, h), "less than a block: nothing to look up");
            }
        }
    }
}
