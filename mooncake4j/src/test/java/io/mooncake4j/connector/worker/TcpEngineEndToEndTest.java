package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngines;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The connector over the real TCP transfer engine on loopback (handshake and data over sockets). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpEngineEndToEndTest {

    @Test
    void decodeReceivesEveryByteOverTheTcpEngine() {
        try (PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2, 3, 17);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2, 3, 17));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 40, 41, 50, 2));
            bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(30), "transfer over TCP");
            PdTestbed.assertSameTpCopy(p, 1, d, 40);
            PdTestbed.assertSameTpCopy(p, 2, d, 41);
            PdTestbed.assertSameTpCopy(p, 3, d, 50);
            PdTestbed.assertSameTpCopy(p, 17, d, 2);
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            assertEquals(Set.of("p1"), p.finishedSending);
            assertEquals(1, p.worker.getKvConnectorStats().orElseThrow().numSuccessfulTransfers());
        }
    }
}
