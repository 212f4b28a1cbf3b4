package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.mooncake4j.connector.worker.receive.KvReceiver;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.testlog.LogCapture;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * {@link MooncakeConnectorWorker#setFinishedListener}: the embedder is woken, without polling, by
 * every event that changes what {@code getFinished} returns, on both roles. Each wait below is the
 * embedder's pattern: check {@code getFinished}, then wait for the listener's permit; a lost
 * wake-up times the wait out and fails the test.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FinishedListenerTest {

    private static final long WAIT_SECONDS = 20;

    /** The embedder's side: a permit per listener call, and what its get* calls reported. */
    static final class Embedder implements Runnable {
        final Semaphore wakeups = new Semaphore(0);
        final AtomicInteger calls = new AtomicInteger();
        final Set<String> sending = new LinkedHashSet<>();
        final Set<String> recving = new LinkedHashSet<>();
        final Set<String> failed = new LinkedHashSet<>();
        final Set<Integer> badBlocks = new LinkedHashSet<>();
        volatile Runnable alsoOnCall = () -> { };

        @Override
        public void run() {
            calls.incrementAndGet();
            alsoOnCall.run();
            wakeups.release();
        }

        void drain(MooncakeConnectorWorker w) {
            KvConnectorTransferResults r = w.getTransferResults();
            sending.addAll(r.finishedSending());
            recving.addAll(r.finishedRecving());
            failed.addAll(r.failedRecving());
            badBlocks.addAll(w.getBlockIdsWithLoadErrors());
        }

        /** Checks, then waits for a wake-up, until {@code done}: get* runs only once per wake-up. */
        void await(MooncakeConnectorWorker w, BooleanSupplier done, String what) throws InterruptedException {
            while (true) {
                drain(w);
                if (done.getAsBoolean()) {
                    return;
                }
                if (!wakeups.tryAcquire(WAIT_SECONDS, TimeUnit.SECONDS)) {
                    fail("no wake-up within " + WAIT_SECONDS + " s while waiting for " + what);
                }
            }
        }
    }

    @Test
    void wakesBothRolesForASuccessfulTransfer() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            Embedder pe = new Embedder();
            Embedder de = new Embedder();
            p.worker.setFinishedListener(pe);
            d.worker.setFinishedListener(de);
            // run on D's connector thread: the finished load is already queued for getFinished
            AtomicInteger notYetVisible = new AtomicInteger();
            KvReceiver r = d.worker.receiverOrNull();
            de.alsoOnCall = () -> {
                if (!r.hasFinished()) {
                    notYetVisible.incrementAndGet();
                }
            };
            p.fill(1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            de.await(d.worker, () -> de.recving.contains("d1"), "d1 received");
            pe.await(p.worker, () -> pe.sending.contains("p1"), "p1 sent");
            PdTestbed.assertSameTpCopy(p, 1, d, 2);
            assertEquals(0, notYetVisible.get(), "the listener ran before its event was visible");
            assertTrue(de.calls.get() >= 1 && pe.calls.get() >= 1);
            assertTrue(de.failed.isEmpty() && de.badBlocks.isEmpty());
        }
    }

    @Test
    void wakesDForAFailedLoadWithItsBlocksQueuedFirst() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            bed.engines(() -> {
                ScriptedTransferEngine e = new ScriptedTransferEngine().copyData(true);
                e.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).failNthCall(1, -1);
                return e;
            });
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            Embedder de = new Embedder();
            d.worker.setFinishedListener(de);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2, 3));
            de.await(d.worker, () -> de.recving.contains("d1"), "d1's failed load");
            assertEquals(Set.of(2, 3), de.badBlocks, "the failed blocks came with the finish");
        }
    }

    @Test
    void wakesDWhenTheRemoteEngineIsUnknown() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            Embedder de = new Embedder();
            d.worker.setFinishedListener(de);
            // the bootstrap server has no engine "nobody": D's receiver loop fails the load
            d.step(pull("d1", "X", "nobody", p.bootstrapUrl(), 4));
            de.await(d.worker, () -> de.recving.contains("d1"), "d1 failed on the receiver loop");
            assertEquals(Set.of(4), de.badBlocks);
        }
    }

    @Test
    void wakesPWhenAHoldExpiresWithoutAnyPull() throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(1))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            Embedder pe = new Embedder();
            p.worker.setFinishedListener(pe);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            long t0 = System.nanoTime();
            // nothing else happens: only the expiry timer can wake this embedder
            pe.await(p.worker, () -> pe.sending.contains("p1"), "p1's hold expired");
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(900), "expired early");
            assertTrue(pe.calls.get() >= 1);
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }

    @Test
    void wakesPForARequestFinishedWhileNotPendingASend() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            Embedder pe = new Embedder();
            p.worker.setFinishedListener(pe);
            // never announced: P frees its blocks at once
            p.step(finished("p9", "never-announced", 1));
            pe.await(p.worker, () -> pe.sending.contains("p9"), "p9 freed at once");
        }
    }

    @Test
    void anEventBetweenGetFinishedAndTheWaitIsNotLost() throws Exception {
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            Embedder de = new Embedder();
            d.worker.setFinishedListener(de);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            de.drain(d.worker); // the embedder's check: nothing yet
            assertTrue(de.recving.isEmpty());
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            // the load ends before the embedder waits: its queue has the id already
            WorkerTestSupport.await(d.worker.receiverOrNull()::hasFinished, "the load ended"); // takes nothing
            assertTrue(de.wakeups.tryAcquire(WAIT_SECONDS, TimeUnit.SECONDS), "the wake-up was kept for the wait");
            de.drain(d.worker);
            assertEquals(Set.of("d1"), de.recving);
        }
    }

    @Test
    void aThrowingListenerIsCountedLoggedOnceAndStopsNothing() throws Exception {
        try (PdTestbed bed = new PdTestbed(); LogCapture logs = LogCapture.start(MooncakeConnectorWorker.class)) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            AtomicInteger calls = new AtomicInteger();
            d.worker.setFinishedListener(() -> {
                calls.incrementAndGet();
                throw new IllegalStateException("listener bug");
            });
            long errors0 = d.worker.backgroundErrorCount();
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            p.step(announce("p2", "Y"));
            p.step(finished("p2", "Y", 3));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(WAIT_SECONDS), "d1");
            // the I/O thread survived: a second load on the same connection still ends
            d.step(pull("d2", "Y", "P", p.bootstrapUrl(), 4));
            bed.awaitAll(() -> d.finishedRecving.contains("d2"), Duration.ofSeconds(WAIT_SECONDS), "d2");
            assertTrue(calls.get() >= 2, "called per event: " + calls.get());
            assertEquals(calls.get(), d.worker.backgroundErrorCount() - errors0, "each throw counted");
            assertEquals(1, logs.matching(Level.ERROR, "listener bug").size(), "logged once");
            assertTrue(d.worker.health().healthy(), "no connector thread died");
            assertFalse(d.failedRecving.contains("d1") || d.failedRecving.contains("d2"));
        }
    }
}
