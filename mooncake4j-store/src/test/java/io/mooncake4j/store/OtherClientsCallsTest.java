package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The calls LMCache and SGLang make beyond put/get (docs/store.md, ../shared/spec/store-users.md):
 * put_parts, upsert and its batch and zero-copy forms, put_batch / get_batch, get_buffer /
 * batch_get_buffer, remove_by_regex, get_into_ranges; each through the real client, the real TCP
 * engine and the in-memory master.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class OtherClientsCallsTest {

    private static MooncakeStoreClient client(FakeMaster m) {
        return MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 16L << 20));
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    @Test
    void putPartsStoresTheConcatenation() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m)) {
            byte[] header = RealMasterTest.pattern(28, 1);
            byte[] kv = RealMasterTest.pattern(70_000, 2);
            assertEquals(0, c.putParts("chunk", List.of(header, kv), ReplicateConfig.defaults()));
            assertArrayEquals(concat(header, kv), c.get("chunk"));
            assertEquals(0, c.putParts("empty-part", List.of(header, new byte[0], kv), ReplicateConfig.defaults()));
            assertArrayEquals(concat(header, kv), c.get("empty-part"));
        }
    }

    @Test
    void upsertReplacesAndPutDoesNot() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m); Arena arena = Arena.ofShared()) {
            byte[] v1 = RealMasterTest.pattern(5000, 1);
            byte[] v2 = RealMasterTest.pattern(7000, 2);
            assertEquals(0, c.put("k", v1, ReplicateConfig.defaults()));
            assertEquals(0, c.put("k", v2, ReplicateConfig.defaults()));
            assertArrayEquals(v1, c.get("k"), "a put leaves an existing value alone");
            assertEquals(0, c.upsert("k", v2, ReplicateConfig.defaults()));
            assertArrayEquals(v2, c.get("k"));
            assertEquals(0, c.upsert("new", v1, ReplicateConfig.defaults()));
            assertArrayEquals(v1, c.get("new"));
            assertEquals(0, c.upsertParts("k", List.of(v1, v2), ReplicateConfig.defaults()));
            assertArrayEquals(concat(v1, v2), c.get("k"));
            assertArrayEquals(new int[] {0, 0}, c.upsertBatch(List.of("k", "new"), List.of(v2, v2), ReplicateConfig.defaults()));
            assertArrayEquals(v2, c.get("k"));
            assertArrayEquals(v2, c.get("new"));
            // zero-copy forms, from registered memory
            MemorySegment src = arena.allocate(2 * 4096, 4096);
            assertEquals(0, c.registerBuffer(src.address(), src.byteSize()));
            MemorySegment.copy(v1, 0, src, ValueLayout.JAVA_BYTE, 0, 4096);
            MemorySegment.copy(v2, 0, src, ValueLayout.JAVA_BYTE, 4096, 4096);
            assertEquals(0, c.upsertFrom("k", src.address(), 4096, ReplicateConfig.defaults()));
            assertArrayEquals(Arrays.copyOf(v1, 4096), c.get("k"));
            assertArrayEquals(new int[] {0, 0}, c.batchUpsertFrom(List.of("k", "new"),
                    new long[] {src.address() + 4096, src.address()}, new long[] {4096, 4096}, ReplicateConfig.defaults()));
            assertArrayEquals(Arrays.copyOf(v2, 4096), c.get("k"));
            assertArrayEquals(Arrays.copyOf(v1, 4096), c.get("new"));
            assertTrue(m.calls("BatchUpsertStart") > 0 && m.calls("UpsertStart") > 0);
            // a per-key failure of a batch upsert stays that key's
            m.failKey("new", ErrorCode.OBJECT_REPLICA_BUSY);
            assertArrayEquals(new int[] {0, ErrorCode.OBJECT_REPLICA_BUSY.code()},
                    c.upsertBatch(List.of("k", "new"), List.of(v1, v2), ReplicateConfig.defaults()));
            m.failKey("new", ErrorCode.OK);
            assertArrayEquals(v1, c.get("k"));
            assertArrayEquals(Arrays.copyOf(v1, 4096), c.get("new"));
        }
    }

    @Test
    void copyingBatchesTellMissesFromValues() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m)) {
            byte[] a = RealMasterTest.pattern(1000, 1);
            byte[] b = RealMasterTest.pattern(3_000_000, 2); // larger than the local buffer: a temporary staging
            assertArrayEquals(new int[] {0, 0}, c.putBatch(List.of("a", "b"), List.of(a, b), ReplicateConfig.defaults()));
            assertEquals(1, m.calls("BatchPutStart"));
            List<byte[]> got = c.getBatch(List.of("a", "missing", "b"));
            assertArrayEquals(a, got.get(0));
            assertEquals(0, got.get(1).length);
            assertArrayEquals(b, got.get(2));
            List<Result<byte[]>> vs = c.batchGetValue(List.of("a", "missing"));
            assertArrayEquals(a, vs.get(0).value());
            assertTrue(vs.get(1).missing());
            assertEquals(2, m.calls("BatchGetReplicaList"), "one lookup per batch");
        }
    }

    @Test
    void buffersHoldTheValueInRegisteredMemoryUntilClosed() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m)) {
            byte[] a = RealMasterTest.pattern(50_000, 1);
            byte[] b = RealMasterTest.pattern(60_000, 2);
            assertArrayEquals(new int[] {0, 0}, c.putBatch(List.of("a", "b"), List.of(a, b), ReplicateConfig.defaults()));
            Result<StoreBuffer> one = c.getBuffer("a");
            try (StoreBuffer buf = one.orThrow()) {
                assertEquals(a.length, buf.size());
                assertArrayEquals(a, buf.toArray());
                assertEquals(1, c.callsInFlight(), "an open buffer counts as a call in flight");
            }
            assertEquals(0, c.callsInFlight());
            List<Result<StoreBuffer>> many = c.batchGetBuffer(List.of("b", "missing", "a"));
            assertTrue(many.get(1).missing());
            try (StoreBuffer x = many.get(0).orThrow(); StoreBuffer y = many.get(2).orThrow()) {
                assertArrayEquals(b, x.segment().toArray(ValueLayout.JAVA_BYTE));
                assertArrayEquals(a, y.toArray());
            }
            assertEquals(0, c.callsInFlight());
        }
    }

    @Test
    void removeByRegexRemovesOnlyMatchingKeys() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m)) {
            for (String k : List.of("layer-1", "layer-2", "other-1")) {
                assertEquals(0, c.put(k, new byte[100], ReplicateConfig.defaults()));
            }
            assertEquals(2, c.removeByRegex("^layer-", true));
            assertEquals(List.of("other-1"), m.keys());
            assertEquals(0, c.removeByRegex("^layer-", true));
            assertEquals(ErrorCode.INVALID_PARAMS.code(), c.removeByRegex("([", true));
        }
    }

    @Test
    void getIntoRangesReadsPiecesOfObjectsIntoBuffers() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = client(m); Arena arena = Arena.ofShared()) {
            byte[] x = RealMasterTest.pattern(10_000, 1);
            byte[] y = RealMasterTest.pattern(20_000, 2);
            assertArrayEquals(new int[] {0, 0}, c.putBatch(List.of("x", "y"), List.of(x, y), ReplicateConfig.defaults()));
            MemorySegment b0 = arena.allocate(4096, 4096);
            MemorySegment b1 = arena.allocate(4096, 4096);
            assertEquals(0, c.registerBuffer(b0.address(), b0.byteSize()));
            assertEquals(0, c.registerBuffer(b1.address(), b1.byteSize()));
            long[][][] got = c.getIntoRanges(new long[] {b0.address(), b1.address()},
                    List.of(List.of("x", "y"), List.of("y", "missing", "x")),
                    new long[][][] {{{0, 100}, {200}}, {{0}, {10}, {1000}}},
                    new long[][][] {{{5000, 9990}, {19_000}}, {{0}, {0}, {9999}}},
                    new long[][][] {{{100, 10}, {500}}, {{1000}, {10}, {2}}});
            assertArrayEquals(new long[] {100, 10}, got[0][0]);
            assertArrayEquals(new long[] {500}, got[0][1]);
            assertArrayEquals(new long[] {1000}, got[1][0]);
            assertArrayEquals(new long[] {ErrorCode.OBJECT_NOT_FOUND.code()}, got[1][1]);
            assertArrayEquals(new long[] {ErrorCode.INVALID_PARAMS.code()}, got[1][2], "a range past the object's end");
            assertArrayEquals(Arrays.copyOfRange(x, 5000, 5100), b0.asSlice(0, 100).toArray(ValueLayout.JAVA_BYTE));
            assertArrayEquals(Arrays.copyOfRange(x, 9990, 10_000), b0.asSlice(100, 10).toArray(ValueLayout.JAVA_BYTE));
            assertArrayEquals(Arrays.copyOfRange(y, 19_000, 19_500), b0.asSlice(200, 500).toArray(ValueLayout.JAVA_BYTE));
            assertArrayEquals(Arrays.copyOfRange(y, 0, 1000), b1.asSlice(0, 1000).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(1, m.calls("BatchGetReplicaList"), "one lookup for every key of every buffer");
        }
    }
}
