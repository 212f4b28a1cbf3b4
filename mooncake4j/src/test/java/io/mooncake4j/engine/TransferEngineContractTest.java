package io.mooncake4j.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The behaviour every {@link TransferEngine} must show, run by a subclass against each transport
 * alone (tcp and shm between two engines in one JVM, rdma over the emulated fabric and over real
 * verbs where present), the local short-circuit, the engine core with every transport installed,
 * and the scripted in-JVM engine in copy mode. Transport-specific properties (lanes, endpoints,
 * mappings, wire bytes) stay in each transport's own tests.
 */
public abstract class TransferEngineContractTest {

    protected static final long BUF = 4L << 20;

    /** Two engines (possibly the same) and the name under which the initiator reaches the target. */
    public record Pair(TransferEngine initiator, TransferEngine target, String targetName) {}

    /** Creates and initialises the engines. */
    protected abstract Pair createPair();

    /** Releases what {@link #createPair} created. */
    protected abstract void closePair(Pair pair);

    /** Whether {@code openSegment} fetches a peer's descriptor over the network (not the scripted engine). */
    protected boolean fetchesDescriptors() {
        return true;
    }

    protected HostMemoryAllocator alloc;
    protected HostMemoryStorage local;
    protected HostMemoryStorage remote;
    protected Pair pair;

    @BeforeEach
    void setUpEngines() {
        alloc = new HostMemoryAllocator();
        local = alloc.allocate(BUF);
        remote = alloc.allocate(BUF);
        pair = createPair();
        assertEquals(0, pair.initiator().registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, pair.target().registerMemory(remote.address(), BUF, "cpu:0"));
    }

    @AfterEach
    void tearDownEngines() {
        closePair(pair);
        alloc.close();
    }

    protected static void fill(MemorySegment s, long seed) {
        Random r = new Random(seed);
        for (long i = 0; i < s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
    }

    protected static byte[] bytes(MemorySegment s, long off, long len) {
        return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void writeThenReadRoundTripsEveryByte() {
        fill(local.segment(), 1);
        long[] off = {0, 8192, 1 << 20, (2 << 20) + 3};
        long[] len = {1, 8192, 1 << 20, (1 << 20) + 5};
        long[] src = new long[off.length];
        long[] dst = new long[off.length];
        for (int i = 0; i < off.length; i++) {
            src[i] = local.address() + off[i];
            dst[i] = remote.address() + off[i];
        }
        assertEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), src, dst, len));
        for (int i = 0; i < off.length; i++) {
            assertArrayEquals(bytes(local.segment(), off[i], len[i]), bytes(remote.segment(), off[i], len[i]),
                    "descriptor " + i);
        }
        byte[] expected = bytes(remote.segment(), 0, BUF);
        local.segment().fill((byte) 0);
        assertEquals(0, pair.initiator().batchTransferSyncRead(pair.targetName(), src, dst, len));
        for (int i = 0; i < off.length; i++) {
            assertArrayEquals(java.util.Arrays.copyOfRange(expected, (int) off[i], (int) (off[i] + len[i])),
                    bytes(local.segment(), off[i], len[i]), "descriptor " + i);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void manySmallDescriptorsInOneBatchAllArrive() {
        fill(local.segment(), 2);
        int n = 512;
        long[] src = new long[n];
        long[] dst = new long[n];
        long[] len = new long[n];
        for (int i = 0; i < n; i++) {
            src[i] = local.address() + i * 8192L;
            dst[i] = remote.address() + (n - 1 - i) * 8192L;
            len[i] = 8192;
        }
        assertEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), src, dst, len));
        for (int i = 0; i < n; i += 37) {
            assertArrayEquals(bytes(local.segment(), i * 8192L, 8192),
                    bytes(remote.segment(), (n - 1 - i) * 8192L, 8192), "descriptor " + i);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void eightThreadsWritingAndReadingBackTheirOwnRangesAllSeeTheirBytes() throws Exception {
        int threads = 8;
        long region = BUF / 2 / threads; // first half of local: sources; second half: read-back
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            List<java.util.concurrent.Future<Integer>> results = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long base = t * region;
                int seed = t;
                results.add(pool.submit(() -> {
                    MemorySegment src = local.segment().asSlice(base, region);
                    MemorySegment back = local.segment().asSlice(BUF / 2 + base, region);
                    int bad = 0;
                    for (int round = 0; round < 6; round++) {
                        fill(src, seed * 1000L + round);
                        back.fill((byte) 0);
                        long half = region / 2;
                        if (pair.initiator().batchTransferSyncWrite(pair.targetName(),
                                new long[] {local.address() + base, local.address() + base + half},
                                new long[] {remote.address() + base + half, remote.address() + base},
                                new long[] {half, half}) != 0
                                || pair.initiator().batchTransferSyncRead(pair.targetName(),
                                        new long[] {local.address() + BUF / 2 + base},
                                        new long[] {remote.address() + base}, new long[] {region}) != 0
                                || !java.util.Arrays.equals(bytes(src, half, half), bytes(back, 0, half))
                                || !java.util.Arrays.equals(bytes(src, 0, half), bytes(back, half, half))) {
                            bad++;
                        }
                    }
                    return bad;
                }));
            }
            for (java.util.concurrent.Future<Integer> f : results) {
                assertEquals(0, f.get(50, TimeUnit.SECONDS), "rounds whose bytes did not come back");
            }
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anUnresponsivePeerStallsOnlyItsOwnOpeners() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(fetchesDescriptors(), "no descriptor fetch to stall");
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newCachedThreadPool();
        java.util.concurrent.atomic.AtomicInteger accepts = new java.util.concurrent.atomic.AtomicInteger();
        List<java.net.Socket> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
        // a peer that accepts Metadata requests and never answers
        try (java.net.ServerSocket silent = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread acceptor = Thread.ofPlatform().daemon(true).name("test-silent-peer").start(() -> {
                while (!silent.isClosed()) {
                    try {
                        accepted.add(silent.accept());
                        accepts.incrementAndGet();
                    } catch (java.io.IOException e) {
                        return; // closed
                    }
                }
            });
            String dead = "127.0.0.1:" + silent.getLocalPort();
            TransferEngine e = pair.initiator();
            var first = java.util.concurrent.CompletableFuture.supplyAsync(() -> e.openSegment(dead), pool);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (accepts.get() < 1) { // its fetch is in flight
                assertTrue(System.nanoTime() < deadline, "the fetch never reached the silent peer");
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            // the second opener of the same name, on a thread of its own: the test goes on only once it waits
            // for the first one's fetch (on a busy machine its thread may start late, after the peer is gone)
            var second = new java.util.concurrent.CompletableFuture<Long>();
            Thread secondThread = Thread.ofPlatform().daemon(true).name("test-second-opener")
                    .start(() -> second.complete(e.openSegment(dead)));
            while (!waitsForAnotherFetch(secondThread)) {
                assertTrue(System.nanoTime() < deadline && !second.isDone(),
                        "the second opener never waited for the first one's fetch: " + second);
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            long other = java.util.concurrent.CompletableFuture.supplyAsync(() -> e.openSegment(pair.targetName()), pool)
                    .get(10, TimeUnit.SECONDS);
            assertTrue(other >= 0, "another segment opens while the silent one is being fetched");
            assertEquals(other, e.openSegment(pair.targetName()), "and is cached");
            assertTrue(!first.isDone() && !second.isDone());
            silent.close();
            acceptor.join(TimeUnit.SECONDS.toMillis(20)); // no connection is accepted after the ones closed below
            assertTrue(!acceptor.isAlive(), "the silent peer's accept loop ended");
            for (java.net.Socket s : accepted) {
                s.close(); // the fetch fails: both callers of that name get -1 from the one fetch
            }
            assertEquals(-1L, first.get(20, TimeUnit.SECONDS));
            assertEquals(-1L, second.get(20, TimeUnit.SECONDS));
            assertEquals(1, accepts.get(), "one fetch per name in flight");
        } finally {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
    }

    /** Whether {@code t} is parked waiting for a descriptor fetch another caller runs (the engine's SegmentOpenings). */
    private static boolean waitsForAnotherFetch(Thread t) {
        Thread.State st = t.getState();
        if (st != Thread.State.WAITING && st != Thread.State.TIMED_WAITING) {
            return false;
        }
        for (StackTraceElement f : t.getStackTrace()) {
            if (f.getClassName().endsWith(".SegmentOpenings") && f.getMethodName().equals("await")) {
                return true;
            }
        }
        return false;
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void writeOutsideTargetBuffersFailsAndWritesNothing() {
        fill(local.segment(), 3);
        remote.segment().fill((byte) 0x5A);
        long[] src = {local.address()};
        long[] dst = {remote.address() + BUF - 10};
        long[] len = {100};
        assertNotEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), src, dst, len));
        assertAllBytes(remote.segment(), (byte) 0x5A);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void readOutsideTargetBuffersFailsAndWritesNothingLocally() {
        local.segment().fill((byte) 0x33);
        long[] dst = {remote.address() - 4096};
        assertNotEquals(0, pair.initiator().batchTransferSyncRead(pair.targetName(), new long[] {local.address()},
                dst, new long[] {4096}));
        assertAllBytes(local.segment(), (byte) 0x33);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void oneBadDescriptorFailsTheBatchButGoodOnesAreApplied() {
        fill(local.segment(), 4);
        long[] src = {local.address(), local.address() + 4096};
        long[] dst = {remote.address(), remote.address() + BUF};
        long[] len = {4096, 4096};
        assertNotEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), src, dst, len));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void transferFromUnregisteredLocalMemoryFails() {
        try (HostMemoryAllocator other = new HostMemoryAllocator()) {
            HostMemoryStorage unreg = other.allocate(4096);
            remote.segment().fill((byte) 7);
            assertNotEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(),
                    new long[] {unreg.address()}, new long[] {remote.address()}, new long[] {4096}));
            assertAllBytes(remote.segment(), (byte) 7);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void zeroLengthDescriptorsComplete() {
        assertEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {0}));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void mismatchedArraysAreRejected() {
        assertNotEquals(0, pair.initiator().batchTransferSyncWrite(pair.targetName(), new long[] {local.address()},
                new long[] {remote.address(), remote.address()}, new long[] {8}));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void registrationFollowsMooncakeRules() {
        TransferEngine e = pair.initiator();
        assertEquals(ErrorCodes.ADDRESS_OVERLAPPED, e.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(ErrorCodes.ADDRESS_OVERLAPPED, e.registerMemory(local.address() + 4096, 4096, "cpu:0"));
        assertEquals(ErrorCodes.INVALID_ARGUMENT, e.registerMemory(local.address() + BUF * 4, 0, "cpu:0"));
        assertEquals(ErrorCodes.ADDRESS_NOT_REGISTERED, e.unregisterMemory(local.address() + 8));
        assertEquals(0, e.unregisterMemory(local.address()));
        assertEquals(0, e.registerMemory(local.address(), BUF, "cpu:0"));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void openSegmentOfOwnNameIsZeroAndPeerIsPositive() {
        assertEquals(0, pair.initiator().openSegment(pair.initiator().getLocalSegmentName()));
        long id = pair.initiator().openSegment(pair.targetName());
        assertTrue(id >= 0);
        assertEquals(id, pair.initiator().openSegment(pair.targetName()), "cached");
        assertEquals(-1, pair.initiator().openSegment(""));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void asyncBatchReportsEveryTaskAndFreesOnlyWhenObserved() {
        fill(local.segment(), 5);
        long seg = pair.initiator().openSegment(pair.targetName());
        long batch = pair.initiator().allocateBatchId(4);
        assertTrue(batch > 0);
        List<TransferRequest> reqs = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            reqs.add(TransferRequest.write(local.address() + i * 65536L, seg, remote.address() + i * 65536L, 65536));
        }
        assertEquals(StatusCodes.OK, pair.initiator().submitTransfer(batch, reqs));
        assertEquals(StatusCodes.TOO_MANY_REQUESTS, pair.initiator().submitTransfer(batch, reqs));
        assertEquals(StatusCodes.BATCH_BUSY, pair.initiator().freeBatchId(batch));
        for (int i = 0; i < 3; i++) {
            TransferStatus st = awaitTerminal(pair.initiator(), batch, i);
            assertEquals(TransferStatus.State.COMPLETED, st.state(), "task " + i);
            assertEquals(65536, st.transferredBytes());
        }
        assertEquals(StatusCodes.INVALID_ARGUMENT, pair.initiator().getTransferStatus(batch, 3).code());
        assertEquals(StatusCodes.OK, pair.initiator().freeBatchId(batch));
        assertArrayEquals(bytes(local.segment(), 0, 3 * 65536), bytes(remote.segment(), 0, 3 * 65536));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void asyncTaskOutsideTargetBuffersEndsFailed() {
        long seg = pair.initiator().openSegment(pair.targetName());
        long batch = pair.initiator().allocateBatchId(1);
        assertEquals(StatusCodes.OK, pair.initiator().submitTransfer(batch,
                List.of(TransferRequest.read(local.address(), seg, remote.address() + BUF - 1, 2))));
        assertEquals(TransferStatus.State.FAILED, awaitTerminal(pair.initiator(), batch, 0).state());
        assertEquals(StatusCodes.OK, pair.initiator().freeBatchId(batch));
    }

    protected static TransferStatus awaitTerminal(TransferEngine e, long batch, int task) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            TransferStatus st = e.getTransferStatus(batch, task);
            if (st.code() != 0 || st.state().isTerminal()) {
                return st;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("task " + task + " not terminal within 30 s: " + st);
            }
            Thread.onSpinWait();
        }
    }

    protected static void assertAllBytes(MemorySegment s, byte b) {
        long mismatch = s.mismatch(MemorySegment.ofArray(new byte[(int) s.byteSize()]).fill(b));
        assertEquals(-1, mismatch, "first changed byte");
    }
}
