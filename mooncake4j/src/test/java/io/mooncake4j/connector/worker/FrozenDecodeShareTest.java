package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One slow peer must not take P's whole transfer pool: a D that stops reading makes each transfer to it block for the whole transfer
 * timeout. It may occupy only its share of P's transfer pool (half of {@code num_workers} by
 * default); another D's transfers proceed meanwhile.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FrozenDecodeShareTest {

    @Test
    void aFrozenDecodeHoldsOnlyItsShareOfThePoolAndAnotherDecodeProceeds() throws Exception {
        AtomicReference<String> frozenSession = new AtomicReference<>("none");
        CountDownLatch thaw = new CountDownLatch(1);
        CountDownLatch frozenWriteStarted = new CountDownLatch(1);
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(call -> {
                if (call.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE
                        && frozenSession.get().equals(call.string(0))) {
                    frozenWriteStarted.countDown();
                    try {
                        thaw.await(30, TimeUnit.SECONDS); // the frozen D's transfer blocks until the test thaws it
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }));
            PdTestbed.Node p = bed.producer("P", 0, 1, null); // num_workers = 2: a share of 1 per D
            PdTestbed.Node frozen = bed.consumer("D1", 0, 1);
            PdTestbed.Node other = bed.consumer("D2", 0, 1);
            frozenSession.set("127.0.0.1:" + frozen.worker.rpcPort());
            p.fill(1, 2, 3);
            for (int i = 1; i <= 3; i++) {
                p.step(announce("p" + i, "X" + i));
                p.step(finished("p" + i, "X" + i, i));
            }
            frozen.step(pull("f1", "X1", "P", p.bootstrapUrl(), 10));
            bed.awaitAll(() -> frozenWriteStarted.getCount() == 0, Duration.ofSeconds(20),
                    "the frozen D's first transfer is blocked");
            frozen.step(pull("f2", "X2", "P", p.bootstrapUrl(), 11));
            bed.awaitAll(() -> p.worker.diagnostics().wavesQueuedForShare() == 1, Duration.ofSeconds(20),
                    "the frozen D's second wave waits for its share");
            other.step(pull("o3", "X3", "P", p.bootstrapUrl(), 12));
            bed.awaitAll(() -> other.finishedRecving.contains("o3"), Duration.ofSeconds(20),
                    "the other D's transfer proceeds while the frozen D holds its share");
            PdTestbed.assertSameTpCopy(p, 3, other, 12);
            assertTrue(frozen.finishedRecving.isEmpty());
            thaw.countDown();
            bed.awaitAll(() -> frozen.finishedRecving.contains("f1") && frozen.finishedRecving.contains("f2"),
                    Duration.ofSeconds(20), "the thawed D gets both");
            PdTestbed.assertSameTpCopy(p, 1, frozen, 10);
            PdTestbed.assertSameTpCopy(p, 2, frozen, 11);
            assertEquals(3, p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
        } finally {
            thaw.countDown();
        }
    }
}
