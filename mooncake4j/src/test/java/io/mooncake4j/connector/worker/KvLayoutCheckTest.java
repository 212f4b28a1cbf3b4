package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.blocks;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * The KV layout a worker is given ({@code MooncakeConnectorWorker.Builder#kvLayout}): a P registers it with its
 * bootstrap server and D refuses P's KV before it sends a pull when the two differ; a P refuses a pull that names
 * another layout before it writes anything; a side without a layout (a vLLM peer) compares nothing.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvLayoutCheckTest {

    private static final String A = "llama/L2/H4/KV2/D32/F32/0123456789abcdef/T01234567/B16";
    private static final String B = "llama/L2/H4/KV2/D32/BF16/0123456789abcdef/T01234567/B16";

    @Test
    void dRefusesAPrefillNodeThatRegisteredAnotherLayoutBeforeItPulls() {
        try (LogCapture logs = LogCapture.start("io.mooncake4j");
                PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.kvLayout(A));
            PdTestbed.Node d = bed.node(KvRole.KV_CONSUMER, "D", 0, 1, null, b -> b.kvLayout(B));
            p.fill(1, 2);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1, 2));
            d.step(pull("d1", "X", "P", p.bootstrapUrl(), 40, 41));
            bed.awaitAll(() -> d.blocksWithLoadErrors.containsAll(java.util.Set.of(40, 41)), Duration.ofSeconds(30),
                    "D to fail the load");
            logs.assertLogged(Level.ERROR, "KV layout mismatch: remote engine_id P registered KV layout " + A
                    + ", this decode node's is " + B);
            for (int l = 0; l < d.model.numLayers(); l++) {
                var got = d.block(l, 40);
                for (long off = 0; off < d.page(); off++) {
                    assertEquals(0, got.get(ValueLayout.JAVA_BYTE, off), "not a byte of P landed: layer " + l);
                }
            }
            assertEquals(0, p.worker.getKvConnectorStats().map(s -> s.numSuccessfulTransfers()).orElse(0));
        }
    }

    @Test
    void pRefusesAPullNamingAnotherLayoutAndServesOneNamingNone() {
        try (LogCapture logs = LogCapture.start("io.mooncake4j");
                PdTestbed bed = new PdTestbed().engines(() -> TransferEngines.create("tcp"))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.kvLayout(A));
            PdTestbed.Node d = bed.consumer("D", 0, 1); // its receiver is not used: the pulls go by hand
            p.fill(1);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 1));
            MooncakeXferMetadata plain = PdTestbed.metadataFor(d, Map.of("d1", blocks("X", 40)));
            MooncakeXferMetadata other = withLayout(plain, B);
            assertEquals(B, MooncakeXferMetadataCodec.decode(MooncakeXferMetadataCodec.encode(other)).kvLayout());
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                dealer.send(other);
                MooncakeXferResponse r = dealer.recv();
                assertEquals(MooncakeXferResponseStatus.ERROR, r.status(), r.toString());
                assertTrue(r.errMsg().contains(A) && r.errMsg().contains(B), r.errMsg());
                logs.assertLogged(Level.ERROR, "a pull of another KV layout was refused");
                assertEquals(0, p.worker.getKvConnectorStats().map(s -> s.numSuccessfulTransfers()).orElse(0));

                dealer.send(plain); // a vLLM D: no layout, nothing to compare
                MooncakeXferResponse ok = dealer.recv();
                while (ok.status() == MooncakeXferResponseStatus.CONTINUE) {
                    ok = dealer.recv();
                }
                assertEquals(MooncakeXferResponseStatus.FINISH, ok.status(), ok.toString());
                assertEquals(java.util.List.of("d1"), ok.okReqs(), ok.toString());
            }
            PdTestbed.assertSameTpCopy(p, 1, d, 40);
        }
    }

    private static MooncakeXferMetadata withLayout(MooncakeXferMetadata m, String layout) {
        return new MooncakeXferMetadata(m.remoteHostname(), m.remotePort(), m.remoteTpSize(), m.remoteTpRank(),
                m.reqBlocks(), m.kvCachesBaseAddr(), m.blockLens(), m.kvBlockLens(), m.registeredLayerNames(),
                m.registeredLayerIndices(), m.registeredGroupIndices(), m.remotePpSize(), layout);
    }
}
