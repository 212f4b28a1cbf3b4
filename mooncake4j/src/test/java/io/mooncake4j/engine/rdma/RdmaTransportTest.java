package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Transport behaviour of {@link CoreEngine} on the emulated fabric beyond the engine contract. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaTransportTest {

    private static final long BUF = 1L << 20;

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine target;
    private CoreEngine initiator;

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        alloc.close();
    }

    private HostMemoryStorage[] pair(EmulatedRdmaProvider fabric, String targetDevs, String initiatorDevs,
            Map<String, String> env) {
        target = EmulatedEngines.started(fabric, targetDevs, EmulatedEngines.config(env));
        initiator = EmulatedEngines.started(fabric, initiatorDevs, EmulatedEngines.config(env));
        HostMemoryStorage local = alloc.allocate(BUF);
        HostMemoryStorage remote = alloc.allocate(BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cpu:0"));
        fill(local.segment(), 11);
        return new HostMemoryStorage[] {local, remote};
    }

    private static void fill(MemorySegment s, long seed) {
        Random r = new Random(seed);
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
    }

    private static byte[] bytes(MemorySegment s, long off, long len) {
        return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    private int write(HostMemoryStorage local, HostMemoryStorage remote, long len) {
        return initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {len});
    }

    @Test
    void tasksAreCutIntoSlicesWithTheTailKeptWhole() {
        RdmaSettings e = EmulatedEngines.config(Map.of("MC_SLICE_SIZE", "4096", "MC_FRAGMENT_RATIO", "4")).settings();
        assertEquals(1, RdmaTransport.sliceCount(e, 1));
        assertEquals(1, RdmaTransport.sliceCount(e, 4096 + 1024), "a tail up to slice + fragment stays whole");
        assertEquals(2, RdmaTransport.sliceCount(e, 4096 + 1025));
        assertEquals(16, RdmaTransport.sliceCount(e, 65536 + 100));
        RdmaSettings d = EmulatedEngines.config().settings();
        assertEquals(1, RdmaTransport.sliceCount(d, 65536 + 16384), "defaults: 64 KiB slices, 16 KiB fragment limit");
        assertEquals(2, RdmaTransport.sliceCount(d, 65536 + 16385));
    }

    @Test
    void slicesArePostedAsChainsAndEveryByteArrives() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of("MC_SLICE_SIZE", "4096", "MC_FRAGMENT_RATIO", "4"));
        long len = 65536 + 100;
        assertEquals(0, write(m[0], m[1], len));
        assertArrayEquals(bytes(m[0].segment(), 0, len), bytes(m[1].segment(), 0, len));
        assertEquals(16, fabric.postedRequests(), "one work request per slice");
        assertTrue(fabric.postCalls() < fabric.postedRequests(), "work requests batched per post: "
                + fabric.postCalls() + " posts for " + fabric.postedRequests() + " requests");
        assertEquals(len, fabric.executedBytes());
    }

    @Test
    void aLargeBatchNeedsFarFewerPostsThanWorkRequests() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of("MC_SLICE_SIZE", "4096"));
        int n = 256;
        long[] src = new long[n];
        long[] dst = new long[n];
        long[] len = new long[n];
        for (int i = 0; i < n; i++) {
            src[i] = m[0].address() + i * 4096L;
            dst[i] = m[1].address() + i * 4096L;
            len[i] = 4096;
        }
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len));
        assertArrayEquals(bytes(m[0].segment(), 0, n * 4096L), bytes(m[1].segment(), 0, n * 4096L));
        assertEquals(n, fabric.postedRequests());
        assertTrue(fabric.postCalls() * 8 <= n, fabric.postCalls() + " posts for " + n + " work requests");
    }

    @Test
    void completionsArePolledByOnePollerThreadPerDevice() throws InterruptedException {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1,emu2", Map.of());
        List<Thread> pollers = RdmaTransport.in(initiator).pollerThreads();
        assertEquals(2, pollers.size());
        for (Thread t : pollers) {
            assertTrue(t.getName().matches("mooncake-rdma-poller-\\d+"), t.getName());
            assertTrue(t.isAlive());
        }
        fabric.autoProgress(false); // work stays on the "wire" until progress(): completions come later
        long seg = initiator.openSegment(target.getLocalSegmentName());
        long batch = initiator.allocateBatchId(1);
        assertEquals(StatusCodes.OK, initiator.submitTransfer(batch,
                List.of(TransferRequest.write(m[0].address(), seg, m[1].address(), 256 * 1024))));
        awaitPosted(fabric, 4);
        assertEquals(TransferStatus.State.WAITING, initiator.getTransferStatus(batch, 0).state());
        fabric.progress();
        TransferStatus st = await(initiator, batch, 0);
        assertEquals(TransferStatus.State.COMPLETED, st.state());
        assertEquals(256 * 1024, st.transferredBytes());
        assertArrayEquals(bytes(m[0].segment(), 0, 256 * 1024), bytes(m[1].segment(), 0, 256 * 1024));
        assertEquals(StatusCodes.OK, initiator.freeBatchId(batch));
        initiator.close();
        for (Thread t : pollers) {
            t.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(t.isAlive(), t.getName() + " stopped");
        }
    }

    @Test
    void aFailedCompletionIsRetriedOnAnotherPath() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2", "emu3");
        HostMemoryStorage[] m = pair(fabric, "emu0,emu1", "emu2,emu3", Map.of());
        fabric.failWorkRequests(0, 1, WorkCompletions.REM_ACCESS_ERR);
        assertEquals(0, write(m[0], m[1], 4096));
        assertArrayEquals(bytes(m[0].segment(), 0, 4096), bytes(m[1].segment(), 0, 4096));
        List<String> log = fabric.pathLog();
        assertEquals(2, log.size(), log.toString());
        assertTrue(log.get(0).startsWith("fail "), log.toString());
        assertTrue(log.get(1).startsWith("ok "), log.toString());
        String[] failed = log.get(0).substring(5).split("->");
        String[] ok = log.get(1).substring(3).split("->");
        assertNotEquals(failed[0], ok[0], "another local NIC: " + log);
        assertNotEquals(failed[1], ok[1], "another peer NIC: " + log);
        assertEquals(1, RdmaTransport.in(initiator).failedCompletions());
        assertEquals(1, RdmaTransport.in(initiator).retriedSlices());
    }

    @Test
    void transientFailuresBelowTheRetryCountAreInvisible() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of("MC_RETRY_CNT", "4"));
        fabric.failWorkRequests(0, 3, WorkCompletions.RETRY_EXC_ERR);
        assertEquals(0, write(m[0], m[1], 8192));
        assertArrayEquals(bytes(m[0].segment(), 0, 8192), bytes(m[1].segment(), 0, 8192));
        assertEquals(3, RdmaTransport.in(initiator).failedCompletions());
    }

    @Test
    void aSliceFailingEveryAttemptFailsItsTaskAfterTheRetryCount() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of("MC_RETRY_CNT", "3"));
        fabric.failWorkRequests(0, 1_000, WorkCompletions.REM_ACCESS_ERR);
        assertNotEquals(0, write(m[0], m[1], 4096));
        assertEquals(3, RdmaTransport.in(initiator).failedCompletions(), "MC_RETRY_CNT attempts, no more");
        assertEquals(2, RdmaTransport.in(initiator).retriedSlices());

        long seg = initiator.openSegment(target.getLocalSegmentName());
        long batch = initiator.allocateBatchId(1);
        assertEquals(StatusCodes.OK, initiator.submitTransfer(batch,
                List.of(TransferRequest.read(m[0].address(), seg, m[1].address(), 4096))));
        TransferStatus st = await(initiator, batch, 0);
        assertEquals(TransferStatus.State.FAILED, st.state());
        assertEquals(0, st.transferredBytes());
        assertEquals(StatusCodes.OK, initiator.freeBatchId(batch));
        assertEquals(0, RdmaTransport.in(initiator).liveSlices(), "every slice returned to the pool");

        fabric.failWorkRequests(0, 0, 0);
        assertEquals(0, write(m[0], m[1], 4096), "the transport recovers with fresh endpoints");
    }

    @Test
    void closeWithWorkOutstandingFlushesItThenTearsDownInOrder() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of());
        assertEquals(0, write(m[0], m[1], 4096)); // endpoint up
        fabric.autoProgress(false);
        long seg = initiator.openSegment(target.getLocalSegmentName());
        long batch = initiator.allocateBatchId(1);
        long before = fabric.postedRequests();
        assertEquals(StatusCodes.OK, initiator.submitTransfer(batch,
                List.of(TransferRequest.write(m[0].address(), seg, m[1].address(), 512 * 1024))));
        awaitPosted(fabric, before + 8);
        initiator.close();
        assertEquals(TransferStatus.State.FAILED, initiator.getTransferStatus(batch, 0).state());
        assertEquals(0, RdmaTransport.in(initiator).liveSlices(), "flushed work requests were all accounted for");
        List<String> log = fabric.teardownLog();
        int lastQp = -1;
        int cq = -1;
        int firstMr = -1;
        int pd = -1;
        int ctx = log.indexOf("context emu1");
        for (int i = 0; i < log.size(); i++) {
            String s = log.get(i);
            if (s.startsWith("qp ")) {
                lastQp = i;
            } else if (s.equals("cq") && cq < 0) {
                cq = i;
            } else if (s.equals("mr") && firstMr < 0) {
                firstMr = i;
            } else if (s.equals("pd") && pd < 0) {
                pd = i;
            }
        }
        assertTrue(lastQp >= 0 && lastQp < cq && cq < firstMr && firstMr < pd && pd < ctx,
                "QPs -> CQ -> MRs -> PD -> context: " + log);
    }

    @Test
    void aTimedOutTransferLeavesNoWorkThatCouldTouchTheCallersBuffersAfterReturn() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        // the timeout bounds every sync transfer of this initiator, also the healthy ones before and after the stall
        // (the first one brings the QPs up; the last one brings fresh ones up after the flush): 200 ms fired on
        // those under CPU load; 2 s is still far below the default 30 s and only the stalled write waits for it
        initiator = EmulatedEngines.started(fabric, "emu1", EmulatedEngines.config().withTransferTimeoutMs(2_000));
        HostMemoryStorage local = alloc.allocate(BUF);
        HostMemoryStorage remote = alloc.allocate(BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cpu:0"));
        // connected through the asynchronous API, which has no deadline: under load the bring-up alone may take
        // longer than this engine's 200 ms MC_TRANSFER_TIMEOUT (a sync write here failed that way on a busy machine)
        assertEquals(TransferStatus.State.COMPLETED, writeAsync(local, remote, 4096));
        local.segment().fill((byte) 1);
        remote.segment().fill((byte) 2);
        fabric.autoProgress(false); // the "NIC" stalls: nothing completes
        long before = fabric.postedRequests();
        assertEquals(-1, write(local, remote, 256 * 1024));
        assertTrue(fabric.postedRequests() > before, "work was posted and then flushed");
        fabric.progress(); // whatever was still queued would execute now
        for (long i = 0; i < BUF; i += 4093) {
            assertEquals((byte) 2, remote.segment().get(ValueLayout.JAVA_BYTE, i), "offset " + i);
        }
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
        fabric.autoProgress(true);
        assertEquals(TransferStatus.State.COMPLETED, writeAsync(local, remote, 4096), "fresh endpoints after the flush");
    }

    /** A write through the asynchronous API (no MC_TRANSFER_TIMEOUT), awaited; its final state. */
    private TransferStatus.State writeAsync(HostMemoryStorage local, HostMemoryStorage remote, long len) {
        long seg = initiator.openSegment(target.getLocalSegmentName());
        long batch = initiator.allocateBatchId(1);
        assertEquals(StatusCodes.OK, initiator.submitTransfer(batch,
                List.of(TransferRequest.write(local.address(), seg, remote.address(), len))));
        TransferStatus.State st = await(initiator, batch, 0).state();
        assertEquals(StatusCodes.OK, initiator.freeBatchId(batch));
        return st;
    }

    @Test
    void concurrentSubmittersShareEndpointsSafely() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2", "emu3");
        HostMemoryStorage[] m = pair(fabric, "emu0,emu1", "emu2,emu3", Map.of("MC_SLICE_SIZE", "8192"));
        int threads = 8;
        long part = BUF / threads;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            List<java.util.concurrent.Future<Integer>> results = new java.util.ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long off = t * part;
                results.add(pool.submit(() -> {
                    int rc = 0;
                    for (int round = 0; round < 5 && rc == 0; round++) {
                        rc = initiator.batchTransferSyncWrite(target.getLocalSegmentName(),
                                new long[] {m[0].address() + off, m[0].address() + off + part / 2},
                                new long[] {m[1].address() + off, m[1].address() + off + part / 2},
                                new long[] {part / 2, part / 2});
                    }
                    return rc;
                }));
            }
            for (java.util.concurrent.Future<Integer> f : results) {
                assertEquals(0, f.get(30, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
        assertArrayEquals(bytes(m[0].segment(), 0, BUF), bytes(m[1].segment(), 0, BUF));
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
        assertTrue(RdmaTransport.in(initiator).endpointCount() <= 4, "endpoints per (local NIC, peer NIC): " + RdmaTransport.in(initiator).endpointCount());
    }

    @Test
    void registrationAboveTheMemlockLimitFailsNamingTheFix() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        RdmaEngineConfig cfg = EmulatedEngines.config().withMemlockLimit(() -> OptionalLong.of(3L << 20));
        initiator = EmulatedEngines.started(fabric, "emu0,emu1", cfg);
        HostMemoryStorage big = alloc.allocate(2L << 20);
        assertEquals(ErrorCodes.MEMORY, initiator.registerMemory(big.address(), 2L << 20, "cpu:0"),
                "2 MiB on 2 devices pins 4 MiB > 3 MiB");
        String why = initiator.lastError();
        assertTrue(why.contains("RLIMIT_MEMLOCK") && why.contains("ulimit -l") && why.contains("limits.conf"), why);
        assertEquals(ErrorCodes.ADDRESS_NOT_REGISTERED, initiator.unregisterMemory(big.address()), "nothing kept");
        assertEquals(0, initiator.registerMemory(big.address(), 1L << 20, "cpu:0"), "2 MiB pinned fits");
        assertTrue(initiator.localDescriptor().buffers().size() == 1);
    }

    @Test
    void settingsAreClampedToTheDeviceLimits() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0");
        initiator = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(Map.of("MC_MAX_SGE", "1000",
                "MC_MAX_WR", "100000", "MC_MAX_MR_SIZE", "4096")));
        RdmaSettings s = RdmaTransport.in(initiator).settings();
        assertEquals(30, s.maxSge(), "emulated device: max_sge 30");
        assertEquals(1 << 15, s.maxWr(), "emulated device: max_qp_wr 32768");
        assertEquals(4096, s.maxMrSize(), "MC_MAX_MR_SIZE below the device's max_mr_size is kept");
    }

    @Test
    void anRtrEinvalReprobesTheGidAndTheTransferSucceeds() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of());
        String before = target.localDescriptor().devices().getFirst().gid();
        fabric.failTransition(EmulatedRdmaProvider.Transition.RTR, EmulatedRdmaProvider.EINVAL, 1);
        assertEquals(0, write(m[0], m[1], 4096));
        assertArrayEquals(bytes(m[0].segment(), 0, 4096), bytes(m[1].segment(), 0, 4096));
        String after = target.localDescriptor().devices().getFirst().gid();
        assertNotEquals(before, after, "the passive side (first to reach RTR) moved to the next GID");
        assertTrue(after.startsWith("fe:80:"), after);
    }

    @Test
    void withAFixedGidIndexAnRtrEinvalIsRetriedWithoutReprobing() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        HostMemoryStorage[] m = pair(fabric, "emu0", "emu1", Map.of("MC_GID_INDEX", "1"));
        String before = target.localDescriptor().devices().getFirst().gid();
        fabric.failTransition(EmulatedRdmaProvider.Transition.RTR, EmulatedRdmaProvider.EINVAL, 1);
        assertEquals(0, write(m[0], m[1], 4096));
        assertEquals(before, target.localDescriptor().devices().getFirst().gid());
    }

    @Test
    void registrationBeforeInitializeIsRejected() {
        CoreEngine e = EmulatedEngines.alone(new EmulatedRdmaProvider("emu0"), EmulatedEngines.config());
        HostMemoryStorage b = alloc.allocate(4096);
        assertEquals(ErrorCodes.INVALID_ARGUMENT, e.registerMemory(b.address(), 4096, "cpu:0"));
        assertTrue(e.lastError().contains("not initialized"), e.lastError());
        e.close();
    }

    private static void awaitPosted(EmulatedRdmaProvider fabric, long n) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (fabric.postedRequests() < n) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("only " + fabric.postedRequests() + " work requests posted, expected " + n);
            }
            Thread.onSpinWait();
        }
    }

    private static TransferStatus await(CoreEngine e, long batch, int task) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            TransferStatus st = e.getTransferStatus(batch, task);
            if (st.state().isTerminal()) {
                return st;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("task not terminal: " + st);
            }
            Thread.onSpinWait();
        }
    }
}
