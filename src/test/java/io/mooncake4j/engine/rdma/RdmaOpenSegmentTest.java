package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** openSegment holds no engine-wide lock across a descriptor fetch (issue 14 item 8, after issue 9 item 4). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaOpenSegmentTest {

    private RdmaTransferEngine target;
    private RdmaTransferEngine initiator;
    private ServerSocket silent;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();
    private final AtomicInteger accepts = new AtomicInteger();
    private final ExecutorService pool = Executors.newCachedThreadPool();

    @AfterEach
    void tearDown() throws Exception {
        closeSilent();
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
    }

    /** A peer that accepts Metadata requests and never answers. */
    private String silentPeer() throws IOException {
        silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = Thread.ofPlatform().daemon(true).name("test-silent-peer").start(() -> {
            while (!silent.isClosed()) {
                try {
                    accepted.add(silent.accept());
                    accepts.incrementAndGet();
                } catch (IOException e) {
                    return; // closed
                }
            }
        });
        assertTrue(t.isAlive());
        return "127.0.0.1:" + silent.getLocalPort();
    }

    private void closeSilent() throws IOException {
        if (silent != null) {
            silent.close();
        }
        for (Socket s : accepted) {
            s.close();
        }
    }

    private static void await(java.util.function.BooleanSupplier c) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "condition not reached");
            Thread.onSpinWait();
        }
    }

    @Test
    void anUnresponsivePeerStallsOnlyItsOwnOpeners() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        initiator = EmulatedEngines.started(fabric, "emu1");
        String dead = silentPeer();
        CompletableFuture<Long> first = CompletableFuture.supplyAsync(() -> initiator.openSegment(dead), pool);
        await(() -> accepts.get() == 1); // its fetch is in flight
        CompletableFuture<Long> second = CompletableFuture.supplyAsync(() -> initiator.openSegment(dead), pool);
        long other = CompletableFuture.supplyAsync(() -> initiator.openSegment(target.getLocalSegmentName()), pool)
                .get(10, TimeUnit.SECONDS);
        assertTrue(other > 0, "another peer opens while the silent one is being fetched");
        assertEquals(other, initiator.openSegment(target.getLocalSegmentName()), "and is cached");
        assertTrue(!first.isDone() && !second.isDone());
        closeSilent(); // the fetch fails: both callers of that name get -1 from the one fetch
        assertEquals(-1L, first.get(20, TimeUnit.SECONDS));
        assertEquals(-1L, second.get(20, TimeUnit.SECONDS));
        assertEquals(1, accepts.get(), "one fetch per name in flight");
    }

    @Test
    void blockingVerbsCallsOfBothHandshakeSidesRunOnPlatformThreads() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        initiator = EmulatedEngines.started(fabric, "emu1");
        try (io.mooncake4j.memory.HostMemoryAllocator alloc = new io.mooncake4j.memory.HostMemoryAllocator()) {
            io.mooncake4j.memory.HostMemoryStorage l = alloc.allocate(65536);
            io.mooncake4j.memory.HostMemoryStorage r = alloc.allocate(65536);
            assertEquals(0, initiator.registerMemory(l.address(), 65536, "cpu:0"));
            assertEquals(0, target.registerMemory(r.address(), 65536, "cpu:0"));
            // the active side connects on its connector thread, the passive side answers on the handshake server
            assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {l.address()},
                    new long[] {r.address()}, new long[] {65536}));
        }
        assertEquals(0, fabric.virtualControlCalls(), "ibv_create_qp / ibv_modify_qp never on a virtual thread");
    }
}
