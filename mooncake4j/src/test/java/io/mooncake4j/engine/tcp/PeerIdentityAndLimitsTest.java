package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Peers keyed by the resolved segment (aliases of one peer share its lanes), idle eviction and the
 * bounds a caller can push against (peers, segment names): a peer can make us spend only so much.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PeerIdentityAndLimitsTest {

    private static final int LEN = 64 * 1024;
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private final List<AutoCloseable> closers = new ArrayList<>();

    @AfterEach
    void stop() throws Exception {
        for (int i = closers.size() - 1; i >= 0; i--) {
            closers.get(i).close();
        }
        alloc.close();
    }

    private CoreEngine engine(TcpConfig cfg) {
        CoreEngine e = TcpEngines.started(cfg);
        closers.add(e);
        return e;
    }

    private HostMemoryStorage registered(CoreEngine e) {
        HostMemoryStorage b = alloc.allocate(LEN);
        assertEquals(0, e.registerMemory(b.address(), LEN, "cpu:0"));
        return b;
    }

    private static void await(BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.onSpinWait();
        }
    }

    /** Writes a pattern from {@code src} to {@code dst} of {@code target} through {@code name} and checks it. */
    private static void assertWrite(CoreEngine from, String name, HostMemoryStorage src, HostMemoryStorage dst,
            int seed) {
        for (int i = 0; i < 4096; i++) {
            src.segment().set(ValueLayout.JAVA_BYTE, i, (byte) (i * 13 + seed));
        }
        assertEquals(0, from.batchTransferSyncWrite(name, new long[] {src.address()}, new long[] {dst.address()},
                new long[] {4096}), "write through " + name);
        assertArrayEquals(src.segment().asSlice(0, 4096).toArray(ValueLayout.JAVA_BYTE),
                dst.segment().asSlice(0, 4096).toArray(ValueLayout.JAVA_BYTE));
    }

    private static long laneThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().startsWith("mooncake-initiator-send-")
                        || t.getName().startsWith("mooncake-initiator-recv-"))
                .count();
    }

    private static int platformThreads() {
        return Thread.getAllStackTraces().size();
    }

    @Test
    void fortyAliasesOfOneEngineShareOneSegmentAndOnePeer() {
        CoreEngine target = engine(TcpEngines.config());
        CoreEngine initiator = engine(TcpEngines.config());
        HostMemoryStorage dst = registered(target);
        HostMemoryStorage src = registered(initiator);
        int port = target.getRpcPort();
        List<String> aliases = new ArrayList<>();
        String[] hosts = {"127.0.0.1", "localhost", "127.1", "LOCALHOST"};
        for (String h : hosts) {
            for (int zeros = 0; zeros < 10; zeros++) {
                aliases.add(h + ":" + "0".repeat(zeros) + port);
            }
        }
        assertEquals(40, new HashSet<>(aliases).size());
        assertWrite(initiator, aliases.get(0), src, dst, 0);
        int threads = platformThreads();
        Set<Long> ids = new HashSet<>();
        int seed = 1;
        for (String a : aliases) {
            ids.add(initiator.openSegment(a));
            assertWrite(initiator, a, src, dst, seed++);
        }
        assertEquals(1, ids.size(), "one segment id for all aliases: " + ids);
        assertEquals(1, TcpTransport.in(initiator).livePeers());
        // at most the target's session threads for the one peer's other lanes (4 lanes); 40 peers would add 320
        assertTrue(platformThreads() - threads <= 8, "threads " + threads + " -> " + platformThreads());
    }

    @Test
    void anUnresponsiveEndpointDoesNotDelayOpeningAHealthyOne() throws Exception {
        HandshakeConfig hs = HandshakeConfig.ephemeral(TcpEngines.LOOPBACK).withRequestLimits(10_000, 3_000, 256);
        CoreEngine initiator = engine(TcpConfig.fromEnvironment(Map.of(), hs));
        CoreEngine healthy = engine(TcpEngines.config());
        try (ServerSocket silent = new ServerSocket(0, 50, TcpEngines.LOOPBACK)) { // accepts (backlog), never answers
            String dead = "127.0.0.1:" + silent.getLocalPort();
            long t0 = System.nanoTime();
            List<CompletableFuture<Long>> stalled = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                stalled.add(CompletableFuture.supplyAsync(() -> initiator.openSegment(dead),
                        r -> Thread.ofVirtual().start(r)));
            }
            await(() -> initiator.openingsInFlight() == 1, "the four opens to share one stalled fetch");
            long opened = initiator.openSegment(healthy.getLocalSegmentName());
            long healthyMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(opened > 0);
            assertTrue(healthyMs < 2_000, "the healthy segment opened in " + healthyMs + " ms");
            for (CompletableFuture<Long> f : stalled) {
                assertEquals(-1L, f.get(20, TimeUnit.SECONDS));
            }
            long deadMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(deadMs >= 2_500 && deadMs < 15_000, "the silent endpoint failed at the 3 s deadline: "
                    + deadMs + " ms");
        }
    }

    @Test
    void idlePeersAreClosedAndReopenedOnTheNextTransfer() {
        CoreEngine target = engine(TcpEngines.config());
        // 2 s idle timeout, not less: the checks right after the write that the peer and its lanes are live
        // race with it (a test thread descheduled for 300 ms under load would find the peer closed already)
        CoreEngine initiator = engine(TcpEngines.config().withPeerLimits(2_000, 256, 4096));
        HostMemoryStorage dst = registered(target);
        HostMemoryStorage src = registered(initiator);
        assertWrite(initiator, target.getLocalSegmentName(), src, dst, 1);
        assertEquals(1, TcpTransport.in(initiator).livePeers());
        assertTrue(laneThreads() > 0);
        await(() -> TcpTransport.in(initiator).retiredPeers() == 1, "the idle peer to be closed");
        assertEquals(0, TcpTransport.in(initiator).livePeers());
        await(() -> laneThreads() == 0, "the lane threads to exit");
        assertWrite(initiator, target.getLocalSegmentName(), src, dst, 2);
    }

    @Test
    void thePeerCapClosesTheLongestUnusedIdlePeer() {
        CoreEngine a = engine(TcpEngines.config());
        CoreEngine b = engine(TcpEngines.config());
        CoreEngine initiator = engine(TcpEngines.config().withPeerLimits(600_000, 1, 4096));
        HostMemoryStorage da = registered(a);
        HostMemoryStorage db = registered(b);
        HostMemoryStorage src = registered(initiator);
        assertWrite(initiator, a.getLocalSegmentName(), src, da, 1);
        assertWrite(initiator, b.getLocalSegmentName(), src, db, 2);
        assertEquals(1, TcpTransport.in(initiator).livePeers());
        assertEquals(1, TcpTransport.in(initiator).retiredPeers());
        assertWrite(initiator, a.getLocalSegmentName(), src, da, 3);
        assertEquals(1, TcpTransport.in(initiator).livePeers());
    }

    @Test
    void segmentNamesAreBounded() {
        CoreEngine target = engine(TcpEngines.config());
        CoreEngine initiator = engine(TcpEngines.config().withPeerLimits(600_000, 256, 2));
        int port = target.getRpcPort();
        assertTrue(initiator.openSegment("127.0.0.1:" + port) > 0);
        assertTrue(initiator.openSegment("localhost:" + port) > 0);
        assertEquals(0, initiator.counters().segmentLimitHits());
        assertEquals(-1, initiator.openSegment("127.1:" + port), "a third name is refused");
        assertEquals(1, initiator.counters().segmentLimitHits(), "the refusal is counted");
        assertTrue(initiator.openSegment("localhost:" + port) > 0, "known names still open");
        assertEquals(1, initiator.counters().segmentLimitHits());
    }
}
