package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Faults against a real {@code mooncake_master} ({@code MOONCAKE_MASTER}; skipped when unset): the
 * node owning a replica killed mid-get (a real second process, SIGKILL), and a read lease that
 * runs out before the read completes.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class StoreFaultsTest {

    /** Far beyond any transfer on a busy machine, far below a hang; the class timeout is the backstop. */
    private static final long BOUND_MS = 60_000;

    private static Process startHolder(MasterProcess m, long segment) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xshare:auto", "-cp",
                System.getProperty("java.class.path"), StoreHolderChild.class.getName(), m.hostPort(),
                Long.toString(segment)).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    }

    private static String awaitReady(Process p) throws Exception {
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line;
        while ((line = out.readLine()) != null && !line.startsWith("READY ")) {
            // skip anything else the child prints
        }
        assertNotNull(line, "the holder exited before mounting its segment");
        return line.substring(6);
    }

    @Test
    void theNodeOwningAReplicaKilledMidGetIsAnErrorNotAHang() throws Exception {
        try (MasterProcess m = new MasterProcess();
                MooncakeStoreClient reader = MooncakeStoreClient.setup(RealMasterTest.config(m, 0));
                Arena arena = Arena.ofShared()) {
            Process holder = startHolder(m, 64L << 20);
            try {
                String holderName = awaitReady(holder);
                int n = 16;
                int size = 1 << 20;
                MemorySegment src = arena.allocate((long) n * size, 4096);
                MemorySegment dst = arena.allocate((long) n * size, 4096);
                assertEquals(0, reader.registerBuffer(src.address(), src.byteSize()));
                assertEquals(0, reader.registerBuffer(dst.address(), dst.byteSize()));
                List<String> keys = new ArrayList<>();
                long[][] sa = new long[n][];
                long[][] da = new long[n][];
                long[][] sz = new long[n][];
                for (int i = 0; i < n; i++) {
                    keys.add("owned-" + i);
                    MemorySegment.copy(RealMasterTest.pattern(size, i), 0, src, ValueLayout.JAVA_BYTE, (long) i * size, size);
                    sa[i] = new long[] {src.address() + (long) i * size};
                    da[i] = new long[] {dst.address() + (long) i * size};
                    sz[i] = new long[] {size};
                }
                // the reader contributes no memory: every value lands in the holder's segment
                assertArrayEquals(new int[n], reader.batchPutFromMultiBuffers(keys, sa, sz, ReplicateConfig.defaults()));
                long[] before = reader.batchGetIntoMultiBuffers(keys, da, sz);
                for (int i = 0; i < n; i++) {
                    assertEquals(size, before[i], keys.get(i));
                }
                assertTrue(dst.mismatch(src) < 0);

                // mid-get: the replica lists name the holder, then the holder dies before the reads
                long t0 = System.nanoTime();
                List<Result<ReplicaList>> lists = reader.master().batchGetReplicaList(keys);
                for (Result<ReplicaList> r : lists) {
                    assertEquals(holderName, r.orThrow().replicas().getFirst().endpoint());
                }
                holder.destroyForcibly();
                assertTrue(holder.waitFor(30, TimeUnit.SECONDS), "the holder did not die");
                long[] during = reader.dataPath().get(keys, da, sz, lists, t0);
                long ms = (System.nanoTime() - t0) / 1_000_000;
                for (int i = 0; i < n; i++) {
                    assertTrue(during[i] < 0, keys.get(i) + " read " + during[i] + " bytes from a dead node");
                }
                assertTrue(ms < BOUND_MS, "reads from a dead node took " + ms + " ms");

                // the master still lists the dead node's segment (until its client TTL): a full get
                // fails per key within the deadline as well
                t0 = System.nanoTime();
                long[] after = reader.batchGetIntoMultiBuffers(keys, da, sz);
                ms = (System.nanoTime() - t0) / 1_000_000;
                for (int i = 0; i < n; i++) {
                    assertTrue(after[i] < 0, keys.get(i) + " read " + after[i] + " bytes from a dead node");
                }
                assertTrue(ms < BOUND_MS, "a get from a dead node took " + ms + " ms");

                // and the client keeps working once live memory is in the pool
                assertEquals(0, reader.healthCheck());
                try (MooncakeStoreClient live = MooncakeStoreClient.setup(RealMasterTest.config(m, 16L << 20))) {
                    ReplicateConfig toLive = ReplicateConfig.defaults().withPreferredSegment(live.getHostname());
                    byte[] v = RealMasterTest.pattern(200_000, 42);
                    assertEquals(0, reader.put("after-kill", v, toLive));
                    assertArrayEquals(v, reader.get("after-kill"));
                }
            } finally {
                holder.destroyForcibly();
                holder.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void aLeaseThatExpiresBeforeTheReadCompletesIsLeaseExpired() throws Exception {
        long leaseMs = 300;
        try (MasterProcess m = new MasterProcess("--default_kv_lease_ttl=" + leaseMs);
                MooncakeStoreClient c = MooncakeStoreClient.setup(RealMasterTest.config(m, 16L << 20));
                Arena arena = Arena.ofShared()) {
            int size = 64 << 10;
            MemorySegment buf = arena.allocate(2L * size, 4096);
            assertEquals(0, c.registerBuffer(buf.address(), buf.byteSize()));
            MemorySegment.copy(RealMasterTest.pattern(size, 7), 0, buf, ValueLayout.JAVA_BYTE, 0, size);
            assertEquals(0, c.putFrom("leased", buf.address(), size, ReplicateConfig.defaults()));
            long[][] into = {{buf.address() + size}};
            long[][] sizes = {{size}};

            long t0 = System.nanoTime();
            Result<ReplicaList> list = c.master().getReplicaList("leased");
            assertEquals(leaseMs, list.orThrow().leaseTtlMs());
            // the master grants the lease now; it protects the object from eviction and removal
            assertEquals(ErrorCode.OBJECT_HAS_LEASE.code(), c.remove("leased", false));
            // the read completes only after the lease ran out: the bytes may have been evicted and
            // reused meanwhile, so the client reports the read as LEASE_EXPIRED, not as data
            MasterProcess.await("the lease to run out", () -> System.nanoTime() - t0 > (leaseMs + 50) * 1_000_000L,
                    Duration.ofSeconds(30));
            long[] got = c.dataPath().get(List.of("leased"), into, sizes, List.of(list), t0);
            assertEquals(ErrorCode.LEASE_EXPIRED.code(), got[0]);
            // a fresh get takes a new lease and reads the value
            assertEquals(size, c.batchGetIntoMultiBuffers(List.of("leased"), into, sizes)[0]);
            assertTrue(buf.asSlice(size, size).mismatch(buf.asSlice(0, size)) < 0);
            // once that lease too has run out the master lets a plain remove through: it really expired
            long t1 = System.nanoTime();
            MasterProcess.await("the second lease to run out", () -> System.nanoTime() - t1 > (leaseMs + 50) * 1_000_000L,
                    Duration.ofSeconds(30));
            assertEquals(0, c.remove("leased", false));
            assertEquals(0, c.isExist("leased"));
        }
    }
}
