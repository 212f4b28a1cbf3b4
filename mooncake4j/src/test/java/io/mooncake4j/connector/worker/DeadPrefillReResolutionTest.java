package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A restarted P must be found again: D caches the side-channel address of each remote engine id. It drops the entry
 * when that P worker's connection is lost, and when a pull names another bootstrap URL for the
 * engine id, so that a P restarted under the same engine id is found again.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DeadPrefillReResolutionTest {

    private static void pullFrom(PdTestbed bed, PdTestbed.Node p, PdTestbed.Node d, String id, int pBlock, int dBlock) {
        p.fill(pBlock);
        p.step(announce("p-" + id, "X-" + id));
        p.step(finished("p-" + id, "X-" + id, pBlock));
        d.step(pull("d-" + id, "X-" + id, "P", p.bootstrapUrl(), dBlock));
        bed.awaitAll(() -> d.finishedRecving.contains("d-" + id), Duration.ofSeconds(30), "pull " + id);
        assertTrue(d.blocksWithLoadErrors.isEmpty(), "pull " + id + " failed: " + d.blocksWithLoadErrors);
        PdTestbed.assertSameTpCopy(p, pBlock, d, dBlock);
    }

    @Test
    void decodeForgetsAPrefillWhoseConnectionWasLostAndFindsItRestartedUnderTheSameEngineId() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p1 = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            pullFrom(bed, p1, d, "first", 1, 2);
            long before = d.worker.diagnostics().reResolutions();
            p1.worker.close();
            p1.engine.close();
            bed.awaitAll(() -> d.worker.diagnostics().reResolutions() > before, Duration.ofSeconds(20),
                    "D forgets the lost P worker");
            PdTestbed.Node p2 = bed.producer("P", 0, 1, null); // restarted: new ROUTER port, new bootstrap URL
            pullFrom(bed, p2, d, "restarted", 3, 4);
        }
    }

    @Test
    void decodeResolvesAnEngineIdAgainWhenAPullNamesANewBootstrapUrl() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p1 = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            pullFrom(bed, p1, d, "first", 1, 2);
            // a second P under the same engine id, P1 still up: only the URL in the pull tells them apart
            PdTestbed.Node p2 = bed.producer("P", 0, 1, null);
            long before = d.worker.diagnostics().reResolutions();
            pullFrom(bed, p2, d, "new-url", 5, 6); // P1's block 5 is zero: the bytes prove P2 wrote them
            assertEquals(before + 1, d.worker.diagnostics().reResolutions());
            assertEquals(1, p2.engine.callCount(io.mooncake4j.engine.testing.EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
        }
    }
}
