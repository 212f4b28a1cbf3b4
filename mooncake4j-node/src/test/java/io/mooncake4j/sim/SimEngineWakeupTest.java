package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.ModelPreset;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The step loop waits for its workers' finished listeners instead of polling them every
 * millisecond, which would steal the CPU the transfer needs: while D's load is held up at P's write, neither engine steps more than
 * its guard timeout allows, and the load's end still reaches D.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SimEngineWakeupTest {

    private static final long WINDOW_MS = 400;

    private static void await(BooleanSupplier done, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                fail("timed out waiting for " + what);
            }
            LockSupport.parkNanos(1_000_000); // polling interval of the condition, not synchronisation
        }
    }

    @Test
    void engineWaitingForRemoteKvDoesNotPollItsWorkers() throws Exception {
        CountDownLatch writing = new CountDownLatch(1);
        CountDownLatch goWrite = new CountDownLatch(1);
        SimEngine.WorkerFactory workers = ConnectorSimWorker.factory(cfg -> {
            ScriptedTransferEngine e = new ScriptedTransferEngine().copyData(true);
            if (cfg.isProducer()) {
                e.beforeEach(c -> {
                    if (c.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE) {
                        writing.countDown();
                        try {
                            goWrite.await(30, TimeUnit.SECONDS);
                        } catch (InterruptedException ex) {
                            Thread.currentThread().interrupt();
                        }
                    }
                });
            }
            return e;
        });
        try (MooncakeBootstrapServer bs = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            bs.start();
            String hostPort = "127.0.0.1:" + bs.port();
            var base = MooncakeConnectorConfig.builder().protocol("tcp").hostname("127.0.0.1").numWorkers(2)
                    .bootstrapServerAddress(hostPort).abortRequestTimeout(Duration.ofSeconds(30));
            var pCfg = base.kvRole(KvRole.KV_PRODUCER).engineId("p-wake").tp(0, 1).build();
            var dCfg = base.kvRole(KvRole.KV_CONSUMER).engineId("d-wake").tp(0, 1).build();
            try (SimEngine p = SimEngine.start(pCfg, ModelPreset.TINY, 16, SimEngine.Limits.defaults(), workers);
                 SimEngine d = SimEngine.start(dCfg, ModelPreset.TINY, 16, SimEngine.Limits.defaults(), workers)) {
                String url = "http://" + hostPort;
                SimProxy proxy = new SimProxy(p, d, url, SimProxy.resolveEngineId(url, 0));
                CompletableFuture<SimProxy.Exchange> x;
                try {
                    x = proxy.submit("one", new Workload(70, 0, 5).prompt(0), 3);
                    assertTrue(writing.await(30, TimeUnit.SECONDS), "P's write started");
                    await(() -> d.snapshot().loadingRemoteKv() == 1 && p.snapshot().delayedFree() == 1,
                            "D loading, P holding the blocks");
                    // both loops have nothing to do but wait for the connector: observe them for a while
                    long d0 = d.stepCalls();
                    long p0 = p.stepCalls();
                    long t0 = System.nanoTime();
                    long end = t0 + TimeUnit.MILLISECONDS.toNanos(WINDOW_MS);
                    for (long left; (left = end - System.nanoTime()) > 0; ) {
                        LockSupport.parkNanos(left); // an observation window, not synchronisation
                    }
                    long dSteps = d.stepCalls() - d0;
                    long pSteps = p.stepCalls() - p0;
                    long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                    // the 100 ms guard allows elapsed / 100 (+ the steps in flight at either end); the
                    // old 1 ms poll ran hundreds here, and a loaded machine only makes the loops step less
                    long bound = 3 + elapsedMs / 50;
                    assertTrue(dSteps <= bound, "D stepped " + dSteps + " times in " + elapsedMs + " ms");
                    assertTrue(pSteps <= bound, "P stepped " + pSteps + " times in " + elapsedMs + " ms");
                    assertEquals(1, d.snapshot().loadingRemoteKv(), "still loading: the window was a wait");
                } finally {
                    goWrite.countDown();
                }
                SimProxy.Exchange done = x.get(30, TimeUnit.SECONDS);
                assertTrue(done.ok(), done.toString());
                assertEquals(70, done.decode().externalTokens());
                // P is woken by its send's end too: its held blocks are freed without a poll
                await(() -> p.snapshot().freeBlocks() == 16 && p.snapshot().delayedFree() == 0, "P's blocks freed");
            }
        }
    }
}
