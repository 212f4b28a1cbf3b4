package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The real {@link MooncakeStoreClient} and its real TCP engine against the in-repo {@link FakeMaster}
 * through a real socket: values written into another client's segment and read back, exist and
 * remove, per-key failures in a batch, remount after NEED_REMOUNT, read leases, a master that goes
 * silent, and malformed replies.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class FakeMasterStoreTest {

    static final Duration WAIT = Duration.ofSeconds(30);

    static StoreConfig config(FakeMaster m, long segment) {
        return StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(segment).withLocalBufferSize(4L << 20)
                .withTimings(Duration.ofSeconds(2), Duration.ofMillis(100));
    }

    @Test
    void putGetExistRemoveThroughAnotherClientsSegment() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient holder = MooncakeStoreClient.setup(config(m, 8L << 20));
                MooncakeStoreClient user = MooncakeStoreClient.setup(config(m, 0))) {
            byte[] v = RealMasterTest.pattern(300_000, 1);
            assertEquals(0, user.put("k", v, ReplicateConfig.defaults()));
            // the user contributes no memory: the value lives in the holder's segment
            assertEquals(List.of(holder.getHostname()), m.placement("k"));
            assertArrayEquals(v, user.get("k"));
            assertArrayEquals(v, holder.get("k"));
            assertEquals(1, user.isExist("k"));
            assertEquals(0, user.isExist("absent"));
            assertArrayEquals(new int[] {1, 0}, user.batchIsExist(List.of("k", "absent")));
            assertEquals(v.length, user.getSize("k"));
            // a put of an existing key counts as done (another client put it first): the value is untouched
            assertEquals(0, user.put("k", new byte[10], ReplicateConfig.defaults()));
            assertEquals(ErrorCode.OBJECT_ALREADY_EXISTS,
                    user.master().putStart(user.clientId(), "k", 10, ReplicateConfig.defaults()).errorCode());
            assertArrayEquals(v, user.get("k"));
            // the gets took a lease: a plain remove is refused, a forced one goes through
            assertEquals(ErrorCode.OBJECT_HAS_LEASE.code(), user.remove("k"));
            assertEquals(0, user.remove("k", true));
            assertEquals(0, user.isExist("k"));
            assertFalse(m.holds("k"));
            assertEquals(ErrorCode.OBJECT_NOT_FOUND.code(), user.remove("k", true));
        }
    }

    @Test
    void zeroCopyBatchesReportPerKeyFailures() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 8L << 20));
                Arena arena = Arena.ofShared()) {
            int size = 64 << 10;
            int n = 4;
            MemorySegment src = arena.allocate((long) n * size, 4096);
            MemorySegment dst = arena.allocate((long) n * size, 4096);
            assertEquals(0, c.registerBuffer(src.address(), src.byteSize()));
            assertEquals(0, c.registerBuffer(dst.address(), dst.byteSize()));
            List<String> keys = List.of("z0", "z1", "z2", "z3");
            long[] sa = new long[n];
            long[] da = new long[n];
            long[] sz = new long[n];
            for (int i = 0; i < n; i++) {
                MemorySegment.copy(RealMasterTest.pattern(size, i), 0, src, ValueLayout.JAVA_BYTE, (long) i * size, size);
                sa[i] = src.address() + (long) i * size;
                da[i] = dst.address() + (long) i * size;
                sz[i] = size;
            }
            m.failKey("z1", ErrorCode.NO_AVAILABLE_HANDLE);
            m.failKey("z3", ErrorCode.INVALID_KEY);
            assertArrayEquals(new int[] {0, ErrorCode.NO_AVAILABLE_HANDLE.code(), 0, ErrorCode.INVALID_KEY.code()},
                    c.batchPutFrom(keys, sa, sz, ReplicateConfig.defaults()));
            assertEquals(1, c.backpressureCount());
            m.failKey("z1", ErrorCode.OK);
            m.failKey("z3", ErrorCode.OK);
            assertEquals(List.of("z0", "z2"), m.keys());
            long[] got = c.batchGetInto(keys, da, sz);
            assertEquals(size, got[0]);
            assertEquals(ErrorCode.OBJECT_NOT_FOUND.code(), got[1]);
            assertEquals(size, got[2]);
            assertEquals(ErrorCode.OBJECT_NOT_FOUND.code(), got[3]);
            assertTrue(dst.asSlice(0, size).mismatch(src.asSlice(0, size)) < 0);
            assertTrue(dst.asSlice(2L * size, size).mismatch(src.asSlice(2L * size, size)) < 0);
            assertArrayEquals(new int[] {0, ErrorCode.OBJECT_NOT_FOUND.code(), 0, ErrorCode.OBJECT_NOT_FOUND.code()},
                    c.batchRemove(keys, true));
        }
    }

    @Test
    void anExpiredClientRemountsAndTheMasterRestartIsSurvived() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 4L << 20))) {
            long before = c.remountCount();
            assertTrue(m.expireClient(c.clientId()));
            assertTrue(m.mounted().isEmpty());
            MasterProcess.await("a remount after NEED_REMOUNT", () -> c.remountCount() > before && m.mounted().size() == 1,
                    WAIT);
            assertEquals(c.segments(), m.mounted());
            m.restart();
            MasterProcess.await("a remount after the master restarted", () -> m.mounted().size() == 1, WAIT);
            byte[] v = RealMasterTest.pattern(1000, 5);
            assertEquals(0, c.put("after-restart", v, ReplicateConfig.defaults()));
            assertArrayEquals(v, c.get("after-restart"));
        }
    }

    @Test
    void aClientThatStopsPingingIsExpiredByTheClientTtl() throws Exception {
        try (FakeMaster m = new FakeMaster().clientTtl(Duration.ofMillis(1500));
                MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 4L << 20));
                MooncakeStoreClient other = MooncakeStoreClient.setup(config(m, 0))) {
            assertEquals(0, c.put("held", new byte[100], ReplicateConfig.defaults()));
            c.pausePinging(true);
            // any request makes the master look at its clients; the silent one goes with its objects
            MasterProcess.await("the silent client's expiry", () -> other.isExist("held") == 0, WAIT);
            assertFalse(m.knows(c.clientId()));
            c.pausePinging(false);
            MasterProcess.await("the remount", () -> m.knows(c.clientId()) && m.mounted().size() == 1, WAIT);
        }
    }

    @Test
    void aReadLeaseBlocksAPlainRemoveUntilItRunsOut() throws Exception {
        try (FakeMaster m = new FakeMaster().leaseTtl(Duration.ofMillis(1500));
                MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 4L << 20))) {
            assertEquals(0, c.put("leased", new byte[4096], ReplicateConfig.defaults()));
            long t0 = System.nanoTime(); // before the grant: the lease ends 1.5 s after it at the earliest
            assertEquals(1500, c.master().getReplicaList("leased").orThrow().leaseTtlMs());
            assertEquals(ErrorCode.OBJECT_HAS_LEASE.code(), c.remove("leased"));
            MasterProcess.await("the lease to run out", () -> c.remove("leased") == 0, WAIT);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 1500, "the lease ended after " + ms + " ms");
        }
    }

    @Test
    void aSilentMasterTimesCallsOutAndTheClientRecovers() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 4L << 20))) {
            assertEquals(0, c.put("s", new byte[10], ReplicateConfig.defaults()));
            m.silent(true);
            long t0 = System.nanoTime();
            assertEquals(ErrorCode.RPC_TIMEOUT.code(), c.isExist("s"));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 1_500 && ms < 20_000, "timed out after " + ms + " ms");
            assertEquals(2, c.healthCheck());
            m.silent(false);
            MasterProcess.await("the master answering again", () -> c.isExist("s") == 1, WAIT);
            assertEquals(0, c.healthCheck());
        }
    }

    @Test
    void malformedRepliesThroughTheSocketAreRpcFailures() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient c = MooncakeStoreClient.setup(config(m, 4L << 20))) {
            assertEquals(0, c.put("m", new byte[10], ReplicateConfig.defaults()));
            AtomicInteger broken = new AtomicInteger();
            m.fault(r -> "ExistKey".equals(r.rpcName()) && broken.getAndIncrement() == 0 ? FakeMaster.malformed(r) : null);
            assertEquals(ErrorCode.RPC_FAIL.code(), c.isExist("m"));
            assertEquals(1, c.isExist("m"));
            // a batch answer that breaks mid-way fails the whole call, per key
            m.fault(r -> r.rpcName() != null && r.rpcName().endsWith("GetReplicaList") ? FakeMaster.malformed(r) : null);
            long[] got = c.batchGetInto(List.of("m"), new long[] {0}, new long[] {10});
            assertEquals(ErrorCode.RPC_FAIL.code(), got[0]);
            m.fault(null);
            assertArrayEquals(new byte[10], c.get("m"));
        }
    }
}
