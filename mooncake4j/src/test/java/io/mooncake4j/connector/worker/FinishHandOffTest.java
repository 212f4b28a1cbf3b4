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
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The hand-offs that keep a finished load off the loops' queues: D records a pull's answer on its I/O thread (so {@code getFinished} does
 * not depend on the receiver loop), P's transfer thread answers a written wave itself (so D does
 * not wait for P's sender loop), and the finished listener wakes an embedder on a finished load.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FinishHandOffTest {

    private static final Duration WAIT = Duration.ofSeconds(20);

    /** Polls {@code done} (checking only what it names) until true or {@link #WAIT} passed. */
    private static void await(BooleanSupplier done, String what) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                fail("timed out waiting for " + what);
            }
            Thread.onSpinWait();
        }
    }

    private static void awaitLatch(CountDownLatch l, String what) throws InterruptedException {
        assertTrue(l.await(WAIT.toSeconds(), TimeUnit.SECONDS), "timed out waiting for " + what);
    }

    @Test
    void dSeesAFinishedLoadWhileItsReceiverLoopIsBusy() throws Exception {
        CountDownLatch loopBlocked = new CountDownLatch(1);
        CountDownLatch releaseLoop = new CountDownLatch(1);
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1);
            p.step(announce("p1", "X"));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, WAIT, "the pull at P");
            KvReceiver r = d.worker.receiverOrNull();
            FinishSignal finished = FinishSignal.on(d.worker);
            r.loop().execute(() -> {
                loopBlocked.countDown();
                try {
                    releaseLoop.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            try {
                awaitLatch(loopBlocked, "D's receiver loop blocked");
                p.step(finished("p1", "X", 1));
                assertTrue(finished.await(WAIT.toNanos()), "the load's end signalled");
                assertEquals(Set.of("d1"), d.worker.getTransferResults().finishedRecving(),
                        "getFinished names the load while the receiver loop is still blocked");
                assertFalse(finished.await(TimeUnit.MILLISECONDS.toNanos(1)), "nothing more finished");
            } finally {
                releaseLoop.countDown();
            }
            PdTestbed.assertSameTpCopy(p, 1, d, 2);
            bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "p1 sent");
            assertTrue(d.worker.getTransferResults().finishedRecving().isEmpty(), "reported once");
        }
    }

    @Test
    void pAnswersAWrittenWaveWithoutItsSenderLoop() throws Exception {
        CountDownLatch writing = new CountDownLatch(1);
        CountDownLatch goWrite = new CountDownLatch(1);
        CountDownLatch loopBlocked = new CountDownLatch(1);
        CountDownLatch releaseLoop = new CountDownLatch(1);
        try (PdTestbed bed = new PdTestbed()) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(c -> {
                if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE) {
                    writing.countDown();
                    try {
                        goWrite.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }));
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 2));
            try {
                awaitLatch(writing, "P's write started");
                p.worker.listenerOrNull().senderLoop().execute(() -> {
                    loopBlocked.countDown();
                    try {
                        releaseLoop.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                awaitLatch(loopBlocked, "P's sender loop blocked");
                goWrite.countDown();
                // only D is polled: P's getFinished would wait for its blocked loop
                await(() -> {
                    d.poll();
                    return d.finishedRecving.contains("d1");
                }, "d1 received while P's sender loop is blocked");
                PdTestbed.assertSameTpCopy(p, 1, d, 2);
                assertTrue(d.failedRecving.isEmpty() && d.blocksWithLoadErrors.isEmpty());
            } finally {
                goWrite.countDown();
                releaseLoop.countDown();
            }
            // the loop's bookkeeping follows: the send counts once, nothing is left pending
            bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "p1 sent");
            bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 0, WAIT, "the pull ended at P");
            assertEquals(Set.of("p1"), p.finishedSending);
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
        }
    }
}
