package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.ModelPreset;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * End to end through the real connector on 127.0.0.1: bootstrap server, P and D engines with
 * {@link ConnectorSimWorker}s (side channel, bootstrap registration and query, transfer planning,
 * transfer engine), the proxy, and byte verification of every prompt position at D.
 */
class SimConnectorEndToEndTest {

    @ParameterizedTest(name = "{0}: P tp {1} -> D tp {2}")
    @CsvSource({
        "mock, 1, 1",
        "tcp, 1, 1",
        "tcp, 2, 1",
        "tcp, 1, 2",
        "mock, 2, 1",
        "mock, 1, 2",
    })
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void shouldMoveAndVerifyEveryByte(String protocol, int pTp, int dTp) {
        // 48 blocks per rank hold about four of these requests: the pools cycle
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 12, 200, 48, 3, pTp, dTp, protocol, 48, 3,
                11, Duration.ofSeconds(90));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        DemoRunner.Report r = DemoRunner.run(o, ConnectorSimWorker::factory, out);
        r.print(out);
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, r.exitCode(), text);
        assertEquals(12, r.ok(), text);
        assertEquals(0, r.mismatchedWords(), text);
        long bytesPerToken = (long) ModelPreset.TINY.numLayers() * ModelPreset.TINY.numKvHeads() * 2
                * ModelPreset.TINY.headSize() * ModelPreset.TINY.dtypeBytes();
        assertEquals(12L * 200 * bytesPerToken, r.bytesVerified(), "every prompt byte verified at D");
        assertTrue(r.dHitTokens() > 0, "the shared prefix was served from D's own cache: " + text);
        long pulledTokens = r.promptTokens() - r.dHitTokens();
        assertTrue(r.bytesMoved() >= pulledTokens * bytesPerToken, text);
        assertTrue(r.pStats().get("Num successful transfers").longValue() > 0, text);
        assertEquals(0L, r.pStats().get("Num failed transfers").longValue(), text);
        assertEquals(0L, r.dStats().get("Num failed recvs").longValue(), text);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldFailOnlyTheRequestsWhosePushFailed() {
        // P's first batch write fails: the connector answers D with err_reqs, D reports the load as
        // failed, the engine fails those requests; everything else verifies
        SimEngine.WorkerFactory workers = ConnectorSimWorker.factory(cfg -> {
            ScriptedTransferEngine e = new ScriptedTransferEngine().copyData(true);
            if (cfg.isProducer()) {
                e.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).failNthCall(1, -1);
            }
            return e;
        });
        DemoRunner.Options o = new DemoRunner.Options(ModelPreset.TINY, 6, 100, 0, 2, 1, 1, "mock", 48, 6, 3,
                Duration.ofSeconds(40));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        DemoRunner.Report r = DemoRunner.run(o, protocol -> workers, out);
        r.print(out);
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(1, r.exitCode(), text);
        // how many requests the failed batch holds depends on timing (on a loaded machine all six
        // may go in the first pull); one failed P write, and D failing exactly that many, proves
        // that only the failed batch's requests failed
        assertTrue(r.failed() >= 1, "the requests of the failed batch: " + text);
        assertEquals(6, r.ok() + r.failed(), text);
        assertEquals(1L, r.pStats().get("Num failed transfers").longValue(), text);
        assertEquals((long) r.failed(), r.dStats().get("Num failed recvs").longValue(), text);
        assertTrue(r.errors().getFirst().contains("KV load failed"), text);
        assertEquals(0, r.mismatchedWords(), text);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void shouldFreePBlocksAfterFinishedSendingAndDBlocksAfterDecode() throws Exception {
        DemoRunner.Options o = DemoRunner.Options.defaults();
        try (io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer bs =
                     new io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer("127.0.0.1", 0)) {
            bs.start();
            String hostPort = "127.0.0.1:" + bs.port();
            var base = io.mooncake4j.connector.MooncakeConnectorConfig.builder().protocol("tcp")
                    .hostname("127.0.0.1").numWorkers(2).bootstrapServerAddress(hostPort)
                    .abortRequestTimeout(Duration.ofSeconds(20));
            var pCfg = base.kvRole(io.mooncake4j.connector.KvRole.KV_PRODUCER).engineId("p-e2e").tp(0, 1).build();
            var dCfg = base.kvRole(io.mooncake4j.connector.KvRole.KV_CONSUMER).engineId("d-e2e").tp(0, 1).build();
            try (SimEngine p = SimEngine.start(pCfg, ModelPreset.TINY, 16, SimEngine.Limits.defaults(),
                    ConnectorSimWorker.factory("tcp"));
                 SimEngine d = SimEngine.start(dCfg, ModelPreset.TINY, 16, SimEngine.Limits.defaults(),
                    ConnectorSimWorker.factory("tcp"))) {
                String url = "http://" + hostPort;
                SimProxy proxy = new SimProxy(p, d, url, SimProxy.resolveEngineId(url, 0));
                assertEquals("p-e2e", proxy.remoteEngineId());
                SimProxy.Exchange x = proxy.submit("one", new Workload(70, 0, o.seed()).prompt(0), 3)
                        .get(40, TimeUnit.SECONDS);
                assertTrue(x.ok(), x.toString());
                assertEquals(RequestStatus.FINISHED_LENGTH_CAPPED, x.prefill().status());
                assertEquals(70, x.decode().externalTokens());
                assertEquals(5L * d.bytesPerBlockAllRanks(), x.decode().bytesReceived());
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (p.snapshot().freeBlocks() != 16 || d.snapshot().freeBlocks() != 16) {
                    assertTrue(System.nanoTime() < deadline, "blocks not freed: P " + p.snapshot() + ", D "
                            + d.snapshot());
                    java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
                }
                assertEquals(0, p.snapshot().delayedFree());
            }
        }
    }
}
