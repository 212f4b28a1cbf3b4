package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.memory.ModelPreset;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The engine's step loop and the proxy against an in-test connector stand-in ({@link LoopbackHub}). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SimEngineLoopbackTest {

    private static final ModelPreset TINY = ModelPreset.TINY;

    private static MooncakeConnectorConfig cfg(KvRole role, String id, int tp) {
        return MooncakeConnectorConfig.builder().kvRole(role).engineId(id).protocol("tcp").tp(0, tp).build();
    }

    private static void await(BooleanSupplier cond, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    private static List<SimProxy.Exchange> run(SimProxy proxy, Workload w, int n, int decodeTokens) {
        List<CompletableFuture<SimProxy.Exchange>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(proxy.submit("req-" + i, w.prompt(i), decodeTokens));
        }
        return fs.stream().map(SimEngineLoopbackTest::get).toList();
    }

    /** Bounded wait (join() would ignore the @Timeout interrupt). */
    static <T> T get(CompletableFuture<T> f) {
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("no result within 30 s", e);
        }
    }

    @Test
    void shouldMoveAndVerifyEveryRequestThroughSmallBlockPools() throws Exception {
        LoopbackHub hub = new LoopbackHub();
        int tp = 2;
        // 40 blocks per rank hold about three 200-token requests: the pools must cycle
        try (SimEngine p = SimEngine.start(cfg(KvRole.KV_PRODUCER, "p0", tp), TINY, 40,
                new SimEngine.Limits(8, 1024), hub.factory());
             SimEngine d = SimEngine.start(cfg(KvRole.KV_CONSUMER, "d0", tp), TINY, 40,
                new SimEngine.Limits(8, 1024), hub.factory())) {
            SimProxy proxy = new SimProxy(p, d, "http://127.0.0.1:1", "p0");
            Workload w = new Workload(200, 64, 7);
            List<SimProxy.Exchange> xs = run(proxy, w, 24, 4);
            for (SimProxy.Exchange x : xs) {
                assertTrue(x.ok(), () -> x.toString() + " " + x.decode().error());
                assertEquals(RequestStatus.FINISHED_LENGTH_CAPPED, x.prefill().status());
                assertEquals(4, x.decode().outputTokens().length);
                assertEquals(200L * d.bytesPerBlockAllRanks() / TINY.blockSize(), x.decode().bytesVerified(),
                        "every prompt byte of every rank verified");
                assertTrue(x.transferId().startsWith("xfer-"));
            }
            assertTrue(xs.stream().anyMatch(x -> x.decode().localHitTokens() == 64),
                    "later D requests hit the shared 64-token prefix in D's own cache");
            assertTrue(xs.stream().anyMatch(x -> x.prefill().localHitTokens() == 64), "and so do P requests");
            SimProxy.Exchange hitOne = xs.stream().filter(x -> x.decode().localHitTokens() == 64).findFirst().get();
            assertEquals(136, hitOne.decode().externalTokens());
            assertEquals((200 / 16 + 1 - 4) * d.bytesPerBlockAllRanks(), hitOne.decode().bytesReceived(),
                    "only the blocks after the hit are pulled");
            await(() -> p.snapshot().delayedFree() == 0 && p.snapshot().freeBlocks() == 40,
                    "P frees every block after finished_sending");
            await(() -> d.snapshot().freeBlocks() == 40 && d.snapshot().running() == 0, "D frees every block");
            assertEquals(0, hub.pending());
            assertEquals(24, d.snapshot().finished());
            assertEquals(0, d.snapshot().failed());
            assertEquals(24, p.kvConnectorStats().reduce().get("Num successful transfers").intValue() / tp);
        }
    }

    @Test
    void shouldFailOnlyTheRequestWhoseLoadFailedAndFreeItsBlocks() throws Exception {
        LoopbackHub hub = new LoopbackHub();
        try (SimEngine p = SimEngine.start(cfg(KvRole.KV_PRODUCER, "p1", 1), TINY, 64, SimEngine.Limits.defaults(),
                hub.factory());
             SimEngine d = SimEngine.start(cfg(KvRole.KV_CONSUMER, "d1", 1), TINY, 64, SimEngine.Limits.defaults(),
                hub.factory())) {
            SimProxy proxy = new SimProxy(p, d, "http://127.0.0.1:1", "p1");
            Workload w = new Workload(100, 0, 9);
            SimProxy.Exchange good = get(proxy.submit("a", w.prompt(0), 3));
            assertTrue(good.ok());
            hub.failWhen(t -> true);
            SimProxy.Exchange bad = get(proxy.submit("b", w.prompt(1), 3));
            assertEquals(RequestStatus.FINISHED_ERROR, bad.decode().status());
            assertNotNull(bad.decode().error());
            assertTrue(bad.decode().error().contains("invalid block ids"), bad.decode().error());
            assertEquals(0, bad.decode().outputTokens().length);
            hub.failWhen(t -> false);
            SimProxy.Exchange again = get(proxy.submit("c", w.prompt(1), 3));
            assertTrue(again.ok(), "blocks of a failed load are never served from the prefix cache");
            assertEquals(0, again.decode().localHitTokens());
            await(() -> d.snapshot().freeBlocks() == 64 && p.snapshot().freeBlocks() == 64, "all blocks free");
            assertEquals(1, d.snapshot().failed());
            assertEquals(1, d.kvConnectorStats().reduce().get("Num failed recvs").intValue());
        }
    }

    @Test
    void shouldRejectRequestsThatCanNeverFit() throws Exception {
        LoopbackHub hub = new LoopbackHub();
        try (SimEngine d = SimEngine.start(cfg(KvRole.KV_CONSUMER, "d2", 1), TINY, 4, SimEngine.Limits.defaults(),
                hub.factory())) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> d.submit("big", new int[100], 1, null));
            assertTrue(e.getMessage().contains("needs 7 blocks"), e.getMessage());
        }
    }

    @Test
    void shouldRunPlainRequestsWithoutTransferParams() throws Exception {
        LoopbackHub hub = new LoopbackHub();
        try (SimEngine both = SimEngine.start(cfg(KvRole.KV_BOTH, "b0", 1), TINY, 32, SimEngine.Limits.defaults(),
                hub.factory())) {
            SimResult r = get(both.submit("plain", new Workload(50, 0, 1).prompt(0), 5, null));
            assertTrue(r.ok());
            assertEquals(5, r.outputTokens().length);
            assertEquals(0, r.externalTokens());
            await(() -> both.snapshot().freeBlocks() == 32, "blocks freed at once (no transfer)");
        }
    }
}
