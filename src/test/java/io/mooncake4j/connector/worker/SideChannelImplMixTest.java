package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The wire is ZMTP 3 whichever implementation runs ({@code side_channel_zmq}): a P on one and a D on the
 * other pull, twice (the second on D's reused connection), with the bytes checked.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SideChannelImplMixTest {

    @ParameterizedTest
    @CsvSource({"builtin,builtin", "builtin,jeromq", "jeromq,builtin", "jeromq,jeromq"})
    void pAndDOnEitherImplementationPull(String pImpl, String dImpl) {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, c -> c.sideChannelZmq(pImpl), b -> { });
            PdTestbed.Node d = bed.node(KvRole.KV_CONSUMER, "D", 0, 1, null, c -> c.sideChannelZmq(dImpl), b -> { });
            SideChannelFrameBombTest.healthyPull(bed, p, d, "one", 1, 2);
            SideChannelFrameBombTest.healthyPull(bed, p, d, "two", 3, 4);
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            assertEquals(2, p.worker.listenerStats().messagesReceived());
            assertEquals(0, p.worker.listenerStats().malformedMessages());
            assertTrue(p.worker.health().healthy() && d.worker.health().healthy());
        }
    }
}
