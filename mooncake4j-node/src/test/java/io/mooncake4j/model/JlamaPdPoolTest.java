package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimProxy;
import io.mooncake4j.sim.SimResult;
import io.mooncake4j.sim.StoreKvPool;
import io.mooncake4j.store.FakeMaster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * P/D and the pool together, as vLLM's {@code MultiConnector} of the P2P and store connectors: P prefills
 * for D through the P2P connector and also saves the prompt's blocks into the pool; D's tokens are a
 * single node's; a third node E, on the pool only, then serves a prompt sharing P's first 272 tokens from
 * the pool. D, receiving its KV from P, does not consult the pool (the first connector with a hit wins).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class JlamaPdPoolTest {

    @TempDir
    static Path dir;

    @Test
    void pAndDWithThePoolServeTheSameTokensAndFeedTheFleet() throws Exception {
        TinyModelWriter.write(dir.resolve("tiny"), TinyModelWriter.Shape.tiny());
        try (JlamaModel model = JlamaModel.load(dir.resolve("tiny"), "F32");
                FakeMaster m = new FakeMaster();
                MooncakeBootstrapServer bootstrap = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            JlamaStorePoolTest.modelForBench(model);
            bootstrap.start();
            var base = MooncakeConnectorConfig.builder().protocol("tcp").hostname("127.0.0.1").numWorkers(2)
                    .bootstrapServerAddress("127.0.0.1:" + bootstrap.port()).abortRequestTimeout(Duration.ofSeconds(60));
            var pool = JlamaStorePoolTest.poolConfig(m.hostPort(), "tiny", 64L << 20);
            try (SimEngine p = SimEngine.start(base.kvRole(KvRole.KV_PRODUCER).engineId("p-pool").tp(0, 1).build(),
                            new JlamaStepModel(model), 16, 64, SimEngine.Limits.defaults(),
                            ConnectorSimWorker.factory(cfg -> TransferEngines.create("tcp")), SimEngine.KvPlacement.host(),
                            StoreKvPool.factory(pool));
                    SimEngine d = SimEngine.start(base.kvRole(KvRole.KV_CONSUMER).engineId("d-pool").tp(0, 1).build(),
                            new JlamaStepModel(model), 16, 64, SimEngine.Limits.defaults(),
                            ConnectorSimWorker.factory(cfg -> TransferEngines.create("tcp")), SimEngine.KvPlacement.host(),
                            StoreKvPool.factory(pool));
                    SimEngine e = JlamaStorePoolTest.engine("e-pool", StoreKvPool.factory(pool));
                    SimEngine single = JlamaStorePoolTest.engine("single", null)) {
                String url = "http://127.0.0.1:" + bootstrap.port();
                SimProxy proxy = new SimProxy(p, d, url, SimProxy.resolveEngineId(url, 0));
                int[] x = JlamaStorePoolTest.prompt(21, 300);
                int[] y = JlamaStorePoolTest.sharing(x, 22, 320);
                SimResult want = single.submit("s-x", x, 8, null).get(120, TimeUnit.SECONDS);
                SimProxy.Exchange ex = proxy.submit("x", x, 8).get(120, TimeUnit.SECONDS);
                assertTrue(ex.ok(), ex.toString());
                assertEquals(x.length, ex.decode().externalTokens(), "D got the prompt's KV from P: " + ex);
                assertArrayEquals(want.outputTokens(), ex.decode().outputTokens());
                assertEquals(0, (long) d.kvPool().counters().get("lookups"), "D's KV came from P: the pool was not asked");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (p.kvPool().counters().get("saved_blocks") < x.length / 16) {
                    assertTrue(System.nanoTime() < deadline, "P's saves: " + p.kvPool().counters());
                    LockSupport.parkNanos(2_000_000); // polls P's counter, bounded by the deadline
                }
                int[] wantY = single.submit("s-y", y, 8, null).get(120, TimeUnit.SECONDS).outputTokens();
                SimResult ry = e.submit("y", y, 8, null).get(120, TimeUnit.SECONDS);
                assertTrue(ry.ok(), ry.toString());
                assertEquals(272, (long) e.kvPool().counters().get("hit_tokens"), "E loaded P's blocks from the pool");
                assertArrayEquals(wantY, ry.outputTokens());
            }
        }
    }

}
