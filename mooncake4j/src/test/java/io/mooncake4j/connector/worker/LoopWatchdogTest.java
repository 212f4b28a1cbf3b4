package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * No silent death: a watched loop thread that dies is logged once, counted in
 * {@link MooncakeConnectorWorker#health()}, and rebuilt: P's ROUTER listens again on the same port,
 * D's pull I/O goes on with fresh connections.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LoopWatchdogTest {

    private static final Duration WAIT = Duration.ofSeconds(20);

    @Test
    void aListenerThatDiesIsReportedAndItsRouterIsRecreatedOnTheSamePort() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            SideChannelFrameBombTest.healthyPull(bed, p, d, "before", 1, 2);
            int port = p.worker.sideChannelPort();
            p.worker.listenerOrNull().injectFault(new OutOfMemoryError("injected into the listener loop"));
            bed.awaitAll(() -> p.worker.health().loopRecoveries() == 1, WAIT, "listener recreated");
            WorkerHealth h = p.worker.health();
            assertEquals(1, h.loopDeaths());
            assertTrue(h.healthy(), h.toString());
            assertEquals(port, p.worker.sideChannelPort());
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after", 3, 4);
        }
    }

    @Test
    void aPullIoThreadThatDiesIsReportedAndLaterPullsWork() {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            SideChannelFrameBombTest.healthyPull(bed, p, d, "before", 1, 2);
            d.worker.receiverOrNull().channels().injectFault(new OutOfMemoryError("injected into the pull I/O loop"));
            bed.awaitAll(() -> d.worker.health().loopRecoveries() == 1, WAIT, "pull I/O recovered");
            assertEquals(1, d.worker.health().loopDeaths());
            assertTrue(d.worker.health().healthy(), d.worker.health().toString());
            assertTrue(d.worker.receiverOrNull().channels().alive());
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after", 3, 4);
        }
    }
}
