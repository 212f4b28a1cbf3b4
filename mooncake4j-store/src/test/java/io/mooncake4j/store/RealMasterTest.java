package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Against a real {@code mooncake_master} ({@code MOONCAKE_MASTER}; skipped when unset): every RPC
 * the client uses, two Java clients sharing the pool through each other's segments, and faults
 * (master killed and restarted, a client expired for not pinging, a full pool, racing puts).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class RealMasterTest {

    private static final Duration WAIT = Duration.ofSeconds(30);

    static StoreConfig config(MasterProcess m, long segment) {
        return StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(segment).withLocalBufferSize(16L << 20)
                .withTimings(Duration.ofSeconds(3), Duration.ofMillis(300));
    }

    static byte[] pattern(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void everyRpcRoundTrips() throws Exception {
        try (MasterProcess m = new MasterProcess("--default_kv_lease_ttl=2000");
                MasterClient c = new MasterClient(m.address(), Duration.ofSeconds(3), "default")) {
            Uuid me = Uuid.random();
            assertTrue(c.serviceReady().orThrow().matches("\\d+\\.\\d+\\.\\d+.*"));
            assertTrue(c.ping(me).orThrow().needRemount(), "a client the master has not seen must remount");
            Segment s = new Segment(Uuid.random(), "127.0.0.1:17777", 0x7f0000000000L, 64L << 20, "127.0.0.1:17777",
                    "tcp", "");
            assertTrue(c.mountSegment(s, me).ok());
            assertTrue(c.reMountSegment(List.of(s), me).ok());
            assertEquals(PingResult.OK, c.ping(me).orThrow().clientStatus());

            List<ReplicaDescriptor> d = c.putStart(me, "k1", 4096, ReplicateConfig.defaults()).orThrow();
            assertEquals(1, d.size());
            assertEquals(ReplicaDescriptor.Kind.MEMORY, d.getFirst().kind());
            assertEquals(4096, d.getFirst().size());
            assertEquals("127.0.0.1:17777", d.getFirst().endpoint());
            assertTrue(d.getFirst().address() >= s.base() && d.getFirst().address() + 4096 <= s.base() + s.size());
            assertEquals(ReplicaDescriptor.Status.PROCESSING, d.getFirst().status());
            assertTrue(c.putEnd(me, "k1", null).ok());
            assertEquals(ErrorCode.OBJECT_ALREADY_EXISTS, c.putStart(me, "k1", 4096, ReplicateConfig.defaults()).errorCode());
            assertEquals(Result.ok(true), c.existKey("k1"));
            assertEquals(Result.ok(false), c.existKey("nope"));
            ReplicaList rl = c.getReplicaList("k1").orThrow();
            assertEquals(2000, rl.leaseTtlMs());
            assertEquals(ReplicaDescriptor.Status.COMPLETE, rl.replicas().getFirst().status());
            assertEquals(ErrorCode.OBJECT_NOT_FOUND, c.getReplicaList("nope").errorCode());
            assertEquals(ErrorCode.OBJECT_HAS_LEASE, c.remove("k1", false).errorCode());

            assertTrue(c.putStart(me, "k2", 100, ReplicateConfig.defaults().withHardPin(true)).ok());
            assertTrue(c.putRevoke(me, "k2").ok());
            assertEquals(Result.ok(false), c.existKey("k2"));

            String longKey = "x".repeat(300); // every length of the message becomes 2 bytes wide
            List<String> keys = List.of("b1", "b2", longKey);
            List<Result<List<ReplicaDescriptor>>> bs = c.batchPutStart(me, keys, new long[] {10, 20, 30},
                    ReplicateConfig.defaults());
            assertTrue(bs.stream().allMatch(r -> r.ok()), bs.toString());
            assertEquals(30, bs.get(2).value().getFirst().size());
            assertTrue(c.batchPutEnd(me, List.of("b1", longKey)).stream().allMatch(r -> r.ok()));
            assertTrue(c.batchPutRevoke(me, List.of("b2")).stream().allMatch(r -> r.ok()));
            assertEquals(List.of(Result.ok(true), Result.ok(false), Result.ok(true)), c.batchExistKey(keys));
            List<Result<ReplicaList>> bl = c.batchGetReplicaList(List.of("b1", "b2"));
            assertEquals(10, bl.get(0).orThrow().replicas().getFirst().size());
            assertEquals(ErrorCode.OBJECT_NOT_FOUND, bl.get(1).errorCode());
            List<Result<Void>> br = c.batchRemove(List.of(longKey, "b2"), true);
            assertTrue(br.get(0).ok());
            assertEquals(ErrorCode.OBJECT_NOT_FOUND, br.get(1).errorCode());
            assertTrue(c.remove("k1", true).ok());
            assertEquals(1, c.removeAll(true), "b1 was left");
            // pipelined: many calls in flight on the one connection
            List<CompletableFuture<Result<PingResult>>> pings = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                pings.add(c.pingAsync(me));
            }
            for (CompletableFuture<Result<PingResult>> p : pings) {
                assertTrue(p.join().ok());
            }
            assertTrue(c.unmountSegment(s.id(), me).ok());
        }
    }

    /**
     * The RPCs beyond the golden-file set, whose parameter lists follow Mooncake's declarations rather
     * than captured bytes: a master that decodes them differently answers "invalid rpc arg", which
     * fails here. Then the client calls LMCache and SGLang use, against the real master.
     */
    @Test
    void upsertsRemoveByRegexAndTheOtherClientsCallsAgainstARealMaster() throws Exception {
        try (MasterProcess m = new MasterProcess("--default_kv_lease_ttl=200");
                MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 32L << 20))) {
            MasterClient mc = c.master();
            Uuid me = c.clientId();
            assertTrue(mc.upsertStart(me, "u", 100, ReplicateConfig.defaults()).ok());
            assertTrue(mc.upsertEnd(me, "u").ok());
            assertTrue(mc.upsertStart(me, "u", 200, ReplicateConfig.defaults()).ok(), "an upsert of an existing key");
            assertTrue(mc.upsertRevoke(me, "u").ok());
            List<Result<List<ReplicaDescriptor>>> bs = mc.batchUpsertStart(me, List.of("u1", "u2"), new long[] {10, 20},
                    ReplicateConfig.defaults());
            assertTrue(bs.stream().allMatch(r -> r.ok()), bs.toString());
            assertTrue(mc.batchUpsertEnd(me, List.of("u1")).stream().allMatch(r -> r.ok()));
            assertTrue(mc.batchUpsertRevoke(me, List.of("u2")).stream().allMatch(r -> r.ok()));
            assertEquals(Result.ok(true), mc.existKey("u1"));
            assertEquals(Result.ok(false), mc.existKey("u2"));

            byte[] v1 = pattern(5000, 1);
            byte[] v2 = pattern(9000, 2);
            assertEquals(0, c.put("x", v1, ReplicateConfig.defaults()));
            assertEquals(0, c.upsert("x", v2, ReplicateConfig.defaults()));
            MasterProcess.await("the read lease to run out", () -> c.upsert("x", v2, ReplicateConfig.defaults()) == 0, WAIT);
            assertArrayEquals(v2, c.get("x"));
            assertEquals(0, c.putParts("parts", List.of(v1, v2), ReplicateConfig.defaults()));
            byte[] both = java.util.Arrays.copyOf(v1, v1.length + v2.length);
            System.arraycopy(v2, 0, both, v1.length, v2.length);
            assertArrayEquals(both, c.get("parts"));
            try (StoreBuffer b = c.getBuffer("parts").orThrow()) {
                assertArrayEquals(both, b.toArray());
            }
            assertTrue(c.getValue("absent").missing());
            for (String k : List.of("re-1", "re-2", "keep")) {
                assertEquals(0, c.put(k, v1, ReplicateConfig.defaults()));
            }
            assertEquals(2, c.removeByRegex("^re-", true));
            assertEquals(1, c.isExist("keep"));
        }
    }

    @Test
    void twoClientsPutAndGetThroughEachOthersSegments() throws Exception {
        try (MasterProcess m = new MasterProcess();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 64L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 64L << 20));
                Arena arena = Arena.ofShared()) {
            assertEquals(0, a.healthCheck());
            int n = 8;
            int size = 256 << 10;
            MemorySegment bufA = arena.allocate((long) n * size, 4096);
            MemorySegment bufB = arena.allocate((long) n * size, 4096);
            assertEquals(0, a.registerBuffer(bufA.address(), bufA.byteSize()));
            assertEquals(0, b.registerBuffer(bufB.address(), bufB.byteSize()));
            List<String> keys = new ArrayList<>();
            long[] addrA = new long[n];
            long[] addrB = new long[n];
            long[] sizes = new long[n];
            for (int i = 0; i < n; i++) {
                keys.add("obj-" + i);
                MemorySegment.copy(pattern(size, i), 0, bufA, ValueLayout.JAVA_BYTE, (long) i * size, size);
                addrA[i] = bufA.address() + (long) i * size;
                addrB[i] = bufB.address() + (long) i * size;
                sizes[i] = size;
            }
            // A writes into B's segment, B reads them locally; then B writes into A's, A reads remotely
            ReplicateConfig toB = ReplicateConfig.defaults().withPreferredSegment(b.getHostname());
            assertArrayEquals(new int[n], a.batchPutFrom(keys, addrA, sizes, toB));
            for (String k : keys) {
                assertEquals(size, a.getSize(k));
            }
            long[] got = b.batchGetInto(keys, addrB, sizes);
            for (int i = 0; i < n; i++) {
                assertEquals(size, got[i], keys.get(i));
                assertTrue(bufB.asSlice((long) i * size, size).mismatch(bufA.asSlice((long) i * size, size)) < 0);
            }
            byte[] v = pattern(100_000, 99);
            assertEquals(0, b.put("from-b", v, ReplicateConfig.defaults().withPreferredSegment(a.getHostname())));
            assertArrayEquals(v, a.get("from-b"));
            assertArrayEquals(v, b.get("from-b"));
            // multi-buffer: one key from three parts, read back into two
            long[][] parts = {{addrA[0], addrA[1], addrA[2]}};
            long[][] partSizes = {{1000, size, 24}};
            assertArrayEquals(new int[1], a.batchPutFromMultiBuffers(List.of("multi"), parts, partSizes, toB));
            long[] mg = b.batchGetIntoMultiBuffers(List.of("multi"), new long[][] {{addrB[5], addrB[6]}},
                    new long[][] {{size, size}});
            assertEquals(1000 + size + 24, mg[0]);
            assertTrue(bufB.asSlice(5L * size, 1000).mismatch(bufA.asSlice(0, 1000)) < 0);
            assertTrue(bufB.asSlice(5L * size + 1000, size).mismatch(bufA.asSlice(size, size)) < 0);
            assertArrayEquals(new int[] {1, 1, 0}, a.batchIsExist(List.of("obj-0", "multi", "none")));
            assertEquals(ErrorCode.OBJECT_NOT_FOUND.code(), a.getInto("none", addrA[0], size));
            assertEquals(0, a.remove("multi", true));
            assertEquals(0, a.isExist("multi"));
            assertEquals(0, a.batchIsExist(List.of("none")).length - 1);
            assertTrue(a.removeAll(true) >= n);
        }
    }

    @Test
    void aLargeBatchGivesEachKeyItsOwnResultInPlace() throws Exception {
        try (MasterProcess m = new MasterProcess();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 64L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 0));
                Arena arena = Arena.ofShared()) {
            int n = 101;
            int size = 8 << 10;
            MemorySegment src = arena.allocate((long) n * size, 4096);
            MemorySegment dst = arena.allocate((long) n * size, 4096);
            assertEquals(0, b.registerBuffer(src.address(), src.byteSize()));
            assertEquals(0, b.registerBuffer(dst.address(), dst.byteSize()));
            List<String> keys = new ArrayList<>();
            long[] sa = new long[n];
            long[] da = new long[n];
            long[] sizes = new long[n];
            for (int i = 0; i < n; i++) {
                keys.add("big-" + i);
                MemorySegment.copy(pattern(size, 1000 + i), 0, src, ValueLayout.JAVA_BYTE, (long) i * size, size);
                sa[i] = src.address() + (long) i * size;
                da[i] = dst.address() + (long) i * size;
                sizes[i] = size;
            }
            // two keys exist already, with other bytes: already-exists is success, the old value stays
            int second = 35;
            int fourth = 97;
            assertEquals(0, a.put(keys.get(second), pattern(size, 1), ReplicateConfig.defaults()));
            assertEquals(0, a.put(keys.get(fourth), pattern(size, 2), ReplicateConfig.defaults()));
            // one key is empty, which the master refuses: only that key fails
            int third = 66;
            sizes[third] = 0;
            int[] put = b.batchPutFrom(keys, sa, sizes, ReplicateConfig.defaults());
            for (int i = 0; i < n; i++) {
                if (i == third) {
                    assertTrue(put[i] < 0, "an empty value was accepted");
                } else {
                    assertEquals(0, put[i], keys.get(i));
                }
            }
            sizes[third] = size;
            // read back with two keys missing (and the refused one)
            List<String> read = new ArrayList<>(keys);
            read.set(4, "missing-a");
            read.set(n - 1, "missing-b");
            long[] got = b.batchGetInto(read, da, sizes);
            for (int i = 0; i < n; i++) {
                if (i == 4 || i == n - 1 || i == third) {
                    assertEquals(ErrorCode.OBJECT_NOT_FOUND.code(), got[i], read.get(i));
                    continue;
                }
                assertEquals(size, got[i], read.get(i));
                byte[] want = i == second ? pattern(size, 1) : i == fourth ? pattern(size, 2) : pattern(size, 1000 + i);
                assertArrayEquals(want, dst.asSlice((long) i * size, size).toArray(ValueLayout.JAVA_BYTE), read.get(i));
            }
            assertFalse(b.master().rpc().protocolErrors() > 0);
        }
    }

    @Test
    void masterRestartIsSurvived() throws Exception {
        try (MasterProcess m = new MasterProcess(); MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 32L << 20))) {
            byte[] v = pattern(50_000, 1);
            assertEquals(0, c.put("before", v, ReplicateConfig.defaults()));
            long remounts = c.remountCount();
            m.kill();
            long t0 = System.nanoTime();
            int rc = c.put("during", v, ReplicateConfig.defaults());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(rc == ErrorCode.RPC_FAIL.code() || rc == ErrorCode.RPC_TIMEOUT.code(), "rc " + rc);
            assertTrue(ms < 10_000, "a put against a dead master took " + ms + " ms");
            assertEquals(0, c.get("before").length, "a miss, not a hang");
            assertEquals(2, c.healthCheck());
            m.start();
            MasterProcess.await("the client to remount on the new master", () -> c.remountCount() > remounts, WAIT);
            assertEquals(0, c.healthCheck());
            assertEquals(0, c.put("after", v, ReplicateConfig.defaults()));
            assertArrayEquals(v, c.get("after"));
        }
    }

    @Test
    void aClientThatStopsPingingIsExpiredAndComesBack() throws Exception {
        try (MasterProcess m = new MasterProcess("--client_ttl=2");
                MooncakeStoreClient owner = MooncakeStoreClient.setup(config(m, 32L << 20));
                MooncakeStoreClient other = MooncakeStoreClient.setup(config(m, 0))) {
            long remounts = owner.remountCount();
            owner.pausePinging(true);
            MasterProcess.await("the master to expire the silent client", () -> m.log().contains("client_expired"), WAIT);
            // its segment is gone: the only memory in the pool was the owner's
            assertTrue(other.put("k", new byte[1000], ReplicateConfig.defaults()) < 0);
            owner.pausePinging(false);
            MasterProcess.await("the client to remount", () -> owner.remountCount() > remounts, WAIT);
            assertEquals(0, other.put("k", new byte[1000], ReplicateConfig.defaults()));
            assertEquals(1000, owner.get("k").length);
        }
    }

    @Test
    void aFullPoolIsBackpressureAndRacingPutsBothSucceed() throws Exception {
        try (MasterProcess m = new MasterProcess();
                MooncakeStoreClient a = MooncakeStoreClient.setup(config(m, 16L << 20));
                MooncakeStoreClient b = MooncakeStoreClient.setup(config(m, 0))) {
            byte[] mb = pattern(1 << 20, 5);
            ReplicateConfig pinned = ReplicateConfig.defaults().withHardPin(true);
            int rc = 0;
            for (int i = 0; i < 40 && rc == 0; i++) {
                rc = b.put("fill-" + i, mb, pinned);
            }
            assertEquals(ErrorCode.NO_AVAILABLE_HANDLE.code(), rc);
            assertTrue(b.backpressureCount() >= 1);
            assertEquals(a.removeAll(true) > 0, true);
            for (int round = 0; round < 10; round++) {
                String key = "race-" + round;
                byte[] va = pattern(10_000, round);
                byte[] vb = pattern(10_000, round + 100);
                CompletableFuture<Integer> pa = CompletableFuture.supplyAsync(() -> a.put(key, va, ReplicateConfig.defaults()));
                CompletableFuture<Integer> pb = CompletableFuture.supplyAsync(() -> b.put(key, vb, ReplicateConfig.defaults()));
                assertEquals(0, pa.join(), "the loser sees already-exists as success");
                assertEquals(0, pb.join());
                byte[] got = a.get(key);
                assertTrue(java.util.Arrays.equals(got, va) || java.util.Arrays.equals(got, vb));
            }
            assertFalse(a.master().rpc().protocolErrors() > 0);
            StoreException bad = assertThrows(StoreException.class, () -> a.batchPutFrom(List.of("x"), new long[0],
                    new long[0], ReplicateConfig.defaults()));
            assertEquals(ErrorCode.INVALID_PARAMS.code(), bad.errorCode());
        }
    }
}
