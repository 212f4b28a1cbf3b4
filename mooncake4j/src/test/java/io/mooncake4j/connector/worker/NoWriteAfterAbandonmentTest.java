package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * No write after D may have given up: a queued wave whose transfer cannot start within the abort timeout of P's last
 * contact with D (by then D may have declared the load failed and reused the blocks) is not written;
 * D hears it as an error for those requests. P's clock is a test clock; the first wave blocks in the
 * engine so that the second waits in the queue while the clock passes the bound.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NoWriteAfterAbandonmentTest {

    @Test
    void aQueuedWaveWhoseDeadlinePassedIsNotWrittenAndItsRequestFails() throws Exception {
        AtomicLong clock = new AtomicLong();
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch firstStarted = new CountDownLatch(1);
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(call -> {
                if (call.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE && firstStarted.getCount() > 0) {
                    firstStarted.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }));
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X1"));
            p.step(finished("p1", "X1", 1));
            p.step(announce("p2", "X2"));
            p.step(finished("p2", "X2", 2));
            d.step(pull("d1", "X1", "P", p.bootstrapUrl(), 5));
            assertTrue(firstStarted.await(20, TimeUnit.SECONDS), "first wave started");
            d.step(pull("d2", "X2", "P", p.bootstrapUrl(), 6));
            bed.awaitAll(() -> p.worker.diagnostics().wavesQueuedForShare() == 1, Duration.ofSeconds(20),
                    "second wave queued");
            clock.addAndGet(TimeUnit.SECONDS.toNanos(31)); // past the abort timeout of P's last contact with D
            release.countDown();
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && d.finishedRecving.contains("d2"),
                    Duration.ofSeconds(20), "both pulls ended");
            PdTestbed.assertSameTpCopy(p, 1, d, 5); // started in time: written
            assertEquals(1, p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE), "the stale wave wrote nothing");
            for (int l = 0; l < d.model.numLayers(); l++) {
                var block = d.block(l, 6);
                for (long off = 0; off < d.page(); off++) {
                    assertEquals(0, block.get(ValueLayout.JAVA_BYTE, off), "D block 6 untouched");
                }
            }
            assertTrue(d.blocksWithLoadErrors.contains(6), "D hears the stale wave as a failed load");
            assertFalse(d.blocksWithLoadErrors.contains(5));
            assertEquals(1, p.worker.diagnostics().staleWaves());
        } finally {
            release.countDown();
        }
    }
}
