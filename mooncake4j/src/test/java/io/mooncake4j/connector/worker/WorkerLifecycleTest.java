package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.bootstrap.EngineEntry;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Start-up (bootstrap launch and registration, spec §6.4), the per-step API before start-up, and error routing. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkerLifecycleTest {

    @Test
    void rankZeroProducerLaunchesTheBootstrapServerAndRegistersItsSideChannel() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p0 = bed.producer("P", 0, 2, null);
            PdTestbed.Node p1 = bed.producer("P", 1, 2, "127.0.0.1:" + p0.worker.bootstrapServerPort());
            assertTrue(p0.worker.bootstrapServerPort() > 0);
            assertEquals(-1, p1.worker.bootstrapServerPort(), "an external address means no server of its own");
            assertEquals("http://127.0.0.1:" + p0.worker.bootstrapServerPort(),
                    p0.worker.bootstrapServerUrl().orElseThrow());
            MooncakeBootstrapServer server = p0.worker.bootstrapServer().orElseThrow();
            EngineEntry e = server.workers().engine("P").orElseThrow();
            assertEquals(Map.of(0, Map.of(0, "tcp://127.0.0.1:" + p0.worker.sideChannelPort()),
                    1, Map.of(0, "tcp://127.0.0.1:" + p1.worker.sideChannelPort())), e.workerAddr());
            p0.worker.close();
            assertFalse(server.isRunning(), "close() stops the launched server");
        }
    }

    @Test
    void consumerLaunchesNoBootstrapServer() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            assertEquals(-1, d.worker.bootstrapServerPort());
            assertTrue(d.worker.bootstrapServerUrl().isEmpty());
        }
    }

    @Test
    void rejectedRegistrationFailsStartUpWithTheServersReason() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p0 = bed.producer("P", 0, 1, null);
            String addr = "127.0.0.1:" + p0.worker.bootstrapServerPort();
            ConnectorException e = assertThrows(ConnectorException.class,
                    () -> bed.node(KvRole.KV_PRODUCER, "other-engine", 1, 2, addr, b -> { }));
            assertTrue(e.getMessage().contains("Engine ID mismatch"), e.getMessage());
        }
    }

    @Test
    void unreachableBootstrapServerFailsStartUpAtTheDeadline() {
        MooncakeBootstrapServer gone = new MooncakeBootstrapServer("127.0.0.1", 0);
        gone.start();
        String addr = "127.0.0.1:" + gone.port();
        gone.close();
        try (PdTestbed bed = new PdTestbed()) {
            long t0 = System.nanoTime();
            assertThrows(ConnectorException.class, () -> bed.node(KvRole.KV_PRODUCER, "P", 1, 2, addr,
                    c -> c.listenerReadyTimeout(Duration.ofSeconds(2)), b -> { }));
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(20));
        }
    }

    @Test
    void perStepCallsBeforeRegistrationReturnEmptyAndCountTheDroppedWork() {
        ScriptedTransferEngine engine = new ScriptedTransferEngine();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
             MooncakeConnectorWorker w = MooncakeConnectorWorker.builder(WorkerTestSupport.config(KvRole.KV_BOTH),
                     engine, KvCaches.allocate(PdTestbed.MODEL, 1, 4, KvCacheLayout.FUSED, alloc::allocate).config())
                     .memlockLimit(OptionalLong::empty).build()) {
            assertEquals(new FinishedRequests(Set.of(), Set.of()), w.getFinished());
            assertEquals(new KvConnectorTransferResults(Set.of(), Set.of(), Set.of()), w.getTransferResults());
            assertEquals(Set.of(), w.getBlockIdsWithLoadErrors());
            assertTrue(w.getKvConnectorStats().isEmpty());
            w.startLoadKv(pull("d1", "X", "P", "http://127.0.0.1:1", 1));
            w.startLoadKv(announce("p1", "X"));
            assertEquals(2, w.backgroundErrorCount());
        } finally {
            engine.close();
        }
    }

    @Test
    void anEngineThatThrowsIsCountedAndTheRequestFailsInsteadOfHanging() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.engine.beforeEach(c -> {
                if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE) {
                    throw new IllegalStateException("engine bug");
                }
            });
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(20), "failed load");
            assertEquals(Set.of(2), d.blocksWithLoadErrors);
            assertEquals(1, p.worker.backgroundErrorCount());
            assertEquals(1, p.worker.getKvConnectorStats().orElseThrow().numFailedTransfers());
        }
    }

    @Test
    void kvBothWorkerSendsToItself() {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node both = bed.node(KvRole.KV_BOTH, "B", 0, 1, null, b -> { });
            both.fill(3);
            both.step(announce("p1", "X"));
            both.step(finished("p1", "X", 3));
            both.step(pull("d1", "X", "B", both.bootstrapUrl(), 40));
            bed.awaitAll(() -> both.finishedRecving.contains("d1") && both.finishedSending.contains("p1"),
                    Duration.ofSeconds(20), "self transfer");
            PdTestbed.assertSameTpCopy(both, 3, both, 40);
            assertEquals(List.of(), List.copyOf(both.blocksWithLoadErrors));
        }
    }

    /**
     * P's {@code getFinished} waits on the sender loop (expiry is checked there); a close that starts
     * while it waits on a busy loop ends the wait at once. (D's {@code getFinished} waits on no loop.)
     */
    @Test
    void aGetFinishedWaitingOnTheSenderLoopReturnsAsSoonAsCloseStarts() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            CountDownLatch blocked = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            p.worker.listenerOrNull().senderLoop().execute(() -> { // busy for longer than the test waits
                blocked.countDown();
                try {
                    release.await(20, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            assertTrue(blocked.await(10, TimeUnit.SECONDS));
            Thread closer = new Thread(p.worker::close, "test-closer");
            try {
                CompletableFuture<FinishedRequests> call = new CompletableFuture<>();
                Thread caller = new Thread(() -> call.complete(p.worker.getFinished()), "test-step-loop");
                caller.start();
                // the call is parked in its bounded wait for the loop, not yet answered
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (caller.getState() != Thread.State.TIMED_WAITING) {
                    assertTrue(System.nanoTime() < until, "getFinished never waited: " + caller.getState());
                    Thread.onSpinWait();
                }
                assertFalse(call.isDone(), "getFinished answered although the sender loop is busy");
                long start = System.nanoTime();
                closer.start();
                // without the close signal the call would wait out the loop-call timeout (30 s):
                // close() stops the loop with the call's task still queued. The bound is well under
                // that timeout and generous for a busy machine (the close itself may take seconds there)
                FinishedRequests f = call.get(20, TimeUnit.SECONDS);
                assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(20));
                assertEquals(new FinishedRequests(Set.of(), Set.of()), f);
                caller.join(10_000);
                assertFalse(caller.isAlive());
            } finally {
                release.countDown(); // close() quiesces the sender loop: it ends once the loop is free
            }
            closer.join(20_000);
            assertFalse(closer.isAlive());
            assertEquals(0, p.worker.backgroundErrorCount(), "no loop-call timeout reported");
        }
    }
}
