package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.SimEngine;
import io.mooncake4j.sim.SimProxy;
import io.mooncake4j.sim.SimResult;
import io.mooncake4j.sim.SimWorker;
import io.mooncake4j.testlog.LogCapture;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The claim of a real model behind the connector: P prefills the tiny Llama, its KV goes to D through
 * the real connector (bootstrap server, side channel, transfer planning) and the TCP transfer engine
 * on loopback, D decodes, and D's greedy tokens equal those of one {@code kv_both} node; a byte changed
 * in flight changes them (so the equality says something), and a D whose KV layout differs from P's
 * refuses the KV instead of decoding it.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class JlamaDisaggTest {

    private static final int BLOCK = 16;
    private static final int BLOCKS = 64;
    private static final int DECODE = 8;

    @TempDir
    static Path dir;
    private static JlamaModel f32;

    @BeforeAll
    static void makeModel() {
        TinyModelWriter.write(dir.resolve("tiny"), TinyModelWriter.Shape.tiny());
        f32 = JlamaModel.load(dir.resolve("tiny"), "F32");
    }

    @AfterAll
    static void closeModel() {
        if (f32 != null) {
            f32.close();
        }
    }

    /** A P, a D and a kv_both engine over one bootstrap server; closes them all. */
    static final class Rig implements AutoCloseable {
        final MooncakeBootstrapServer bootstrap;
        /** The single node's own: a bootstrap server knows one engine per DP rank. */
        final MooncakeBootstrapServer bootstrapBoth;
        final SimEngine p;
        final SimEngine d;
        final SimEngine both;
        final SimProxy proxy;

        Rig(JlamaModel pModel, JlamaModel dModel, Function<MooncakeConnectorConfig, TransferEngine> pEngines)
                throws Exception {
            this(pModel, dModel, pEngines, false, null, "tcp");
        }

        /**
         * @param layerwise P pushes each layer's KV as it is saved ({@code layerwise_push})
         * @param pSaves    when not null, counts P's {@code saveKvLayer} calls
         */
        Rig(JlamaModel pModel, JlamaModel dModel, Function<MooncakeConnectorConfig, TransferEngine> pEngines,
                boolean layerwise, AtomicInteger pSaves, String protocol) throws Exception {
            bootstrap = new MooncakeBootstrapServer("127.0.0.1", 0);
            bootstrapBoth = new MooncakeBootstrapServer("127.0.0.1", 0);
            SimEngine pe = null;
            SimEngine de = null;
            SimEngine be = null;
            try {
                bootstrap.start();
                bootstrapBoth.start();
                String hostPort = "127.0.0.1:" + bootstrap.port();
                var base = MooncakeConnectorConfig.builder().protocol(protocol).hostname("127.0.0.1").numWorkers(2)
                        .bootstrapServerAddress(hostPort).abortRequestTimeout(Duration.ofSeconds(60));
                Function<MooncakeConnectorConfig, TransferEngine> tcp = cfg -> TransferEngines.create(protocol);
                // the shm transport maps the peer's KV memory: memfd-backed caches on both sides
                SimEngine.KvPlacement place = protocol.equals("tcp") ? SimEngine.KvPlacement.host()
                        : SimEngine.KvPlacement.sharedHost();
                SimEngine.WorkerFactory pWorkers = ConnectorSimWorker.factory(pEngines == null ? tcp : pEngines);
                pe = SimEngine.start(base.kvRole(KvRole.KV_PRODUCER).engineId("p-jlama").tp(0, 1)
                        .layerwisePush(layerwise).build(),
                        new JlamaStepModel(pModel), BLOCK, BLOCKS, SimEngine.Limits.defaults(),
                        pSaves == null ? pWorkers : countingSaves(pWorkers, pSaves), place);
                de = SimEngine.start(base.kvRole(KvRole.KV_CONSUMER).engineId("d-jlama").tp(0, 1).build(),
                        new JlamaStepModel(dModel), BLOCK, BLOCKS, SimEngine.Limits.defaults(),
                        ConnectorSimWorker.factory(tcp), place);
                be = SimEngine.start(base.bootstrapServerAddress("127.0.0.1:" + bootstrapBoth.port())
                        .kvRole(KvRole.KV_BOTH).engineId("both-jlama").tp(0, 1).build(),
                        new JlamaStepModel(pModel), BLOCK, BLOCKS, SimEngine.Limits.defaults(),
                        ConnectorSimWorker.factory(tcp), place);
            } catch (Exception | Error e) {
                closeAll(be, de, pe, bootstrapBoth, bootstrap);
                throw e;
            }
            p = pe;
            d = de;
            both = be;
            String url = "http://" + "127.0.0.1:" + bootstrap.port();
            proxy = new SimProxy(p, d, url, SimProxy.resolveEngineId(url, 0));
        }

        /** {@code workers} whose workers count their {@code saveKvLayer} calls into {@code saves}. */
        private static SimEngine.WorkerFactory countingSaves(SimEngine.WorkerFactory workers, AtomicInteger saves) {
            return new SimEngine.WorkerFactory() {
                @Override
                public SimWorker create(MooncakeConnectorConfig rankConfig, KvCaches caches) {
                    return wrap(workers.create(rankConfig, caches));
                }

                @Override
                public SimWorker create(MooncakeConnectorConfig rankConfig, KvCaches caches, ModelPreset model) {
                    return wrap(workers.create(rankConfig, caches, model));
                }

                private SimWorker wrap(SimWorker real) {
                    return (SimWorker) Proxy.newProxyInstance(SimWorker.class.getClassLoader(),
                            new Class<?>[] {SimWorker.class}, (proxy, m, args) -> {
                                if (m.getName().equals("saveKvLayer")) {
                                    saves.incrementAndGet();
                                }
                                try {
                                    return m.invoke(real, args);
                                } catch (InvocationTargetException e) {
                                    throw e.getCause();
                                }
                            });
                }
            };
        }

        int[] single(String id, int[] prompt) throws Exception {
            SimResult r = both.submit(id, prompt, DECODE, null).get(60, TimeUnit.SECONDS);
            assertTrue(r.ok(), r.toString());
            return r.outputTokens();
        }

        SimProxy.Exchange disagg(String id, int[] prompt) throws Exception {
            return proxy.submit(id, prompt, DECODE).get(60, TimeUnit.SECONDS);
        }

        private static void closeAll(AutoCloseable... cs) {
            for (AutoCloseable c : cs) {
                if (c != null) {
                    try {
                        c.close();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                }
            }
        }

        @Override
        public void close() throws Exception {
            closeAll(both, d, p, bootstrapBoth, bootstrap);
        }
    }

    private static int[] prompt(long seed, int n) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] t = new int[n];
        t[0] = TinyModelWriter.BOS;
        for (int i = 1; i < n; i++) {
            t[i] = 3 + r.nextInt(f32.vocabularySize() - 3);
        }
        return t;
    }

    @Test
    void disaggregatedTokensEqualSingleNodeTokens() throws Exception {
        try (Rig rig = new Rig(f32, f32, null)) {
            int[][] prompts = {
                prompt(1, 37),  // ends inside a block
                prompt(2, 48),  // ends exactly on a block boundary
                prompt(3, 16),  // one full block
                prompt(4, 5),   // shorter than a block
            };
            int tokens = 0;
            for (int i = 0; i < prompts.length; i++) {
                int[] want = rig.single("s" + i, prompts[i]);
                SimProxy.Exchange x = rig.disagg("r" + i, prompts[i]);
                assertTrue(x.ok(), x.toString());
                assertEquals(prompts[i].length, x.decode().externalTokens(), "D loads the whole prompt: " + x);
                assertArrayEquals(want, x.decode().outputTokens(), "request " + i + " (" + prompts[i].length
                        + " prompt tokens)");
                assertEquals(want[0], x.prefill().outputTokens()[0], "P's first token is the single node's");
                tokens += want.length;
            }
            assertEquals(prompts.length * DECODE, tokens);
            // a prompt sharing the first 48 tokens with request 1: D finds 3 blocks in its own prefix
            // cache (received for request 1) and loads only the rest from P
            int[] extended = Arrays.copyOf(prompts[1], 70);
            System.arraycopy(prompt(5, 22), 0, extended, 48, 22);
            int[] want = rig.single("s-hit", extended);
            SimProxy.Exchange x = rig.disagg("r-hit", extended);
            assertTrue(x.ok(), x.toString());
            assertEquals(48, x.decode().localHitTokens(), "D's prefix-cache hit: " + x);
            assertEquals(22, x.decode().externalTokens(), "the rest from P: " + x);
            assertArrayEquals(want, x.decode().outputTokens(), "with a prefix-cache hit at D");
        }
    }

    @Test
    void layerwisePushGivesTheSameTokens() throws Exception {
        // P runs Jlama block by block and pushes each layer's KV while the next layer computes
        AtomicInteger saves = new AtomicInteger();
        try (Rig rig = new Rig(f32, f32, null, true, saves, "tcp")) {
            assertTrue(rig.p.layerwise(), "a Jlama P with layerwise_push on runs layer by layer");
            int[][] prompts = {prompt(11, 37), prompt(12, 48), prompt(13, 300)};
            for (int i = 0; i < prompts.length; i++) {
                int[] want = rig.single("s" + i, prompts[i]);
                SimProxy.Exchange x = rig.disagg("r" + i, prompts[i]);
                assertTrue(x.ok(), x.toString());
                assertEquals(prompts[i].length, x.decode().externalTokens(), "D loads the whole prompt: " + x);
                assertArrayEquals(want, x.decode().outputTokens(), "request " + i + " (" + prompts[i].length
                        + " prompt tokens), layer-wise push");
            }
            assertTrue(saves.get() >= prompts.length * f32.numLayers(),
                    "P saved every layer of every prefill: " + saves.get());
        }
    }

    @Test
    void overSharedMemoryTheTokensAreTheSame() throws Exception {
        // P and D on one machine: engine kind shm (memfd-backed caches mapped by the peer), with and
        // without layer-wise push
        org.junit.jupiter.api.Assumptions.assumeTrue(io.mooncake4j.internal.sys.SharedMemory.available(),
                () -> "no memfd here: " + io.mooncake4j.internal.sys.SharedMemory.unavailableReason());
        for (boolean layerwise : new boolean[] {false, true}) {
            try (Rig rig = new Rig(f32, f32, null, layerwise, null, "shm")) {
                assertEquals(SimEngine.KvPlacement.sharedHost(), rig.p.placement());
                int[][] prompts = {prompt(21, 37), prompt(22, 32)};
                for (int i = 0; i < prompts.length; i++) {
                    int[] want = rig.single("s" + i, prompts[i]);
                    SimProxy.Exchange x = rig.disagg("r" + i, prompts[i]);
                    assertTrue(x.ok(), x.toString());
                    assertEquals(prompts[i].length, x.decode().externalTokens(), x.toString());
                    assertArrayEquals(want, x.decode().outputTokens(), "shm, layerwise " + layerwise + ", request " + i);
                }
            }
        }
    }

    @Test
    void aByteChangedInFlightChangesTheTokens() throws Exception {
        // P's transfer engine flips one byte of what it sends (the bytes of the first write, in P's
        // memory for the duration of that write only): D decodes from the bytes it received
        AtomicInteger writes = new AtomicInteger();
        Function<MooncakeConnectorConfig, TransferEngine> corrupting = cfg -> {
            TransferEngine real = TransferEngines.create("tcp");
            return (TransferEngine) Proxy.newProxyInstance(TransferEngine.class.getClassLoader(),
                    new Class<?>[] {TransferEngine.class}, (proxy, m, args) -> {
                        boolean flip = m.getName().equals("batchTransferSyncWrite") && writes.getAndIncrement() == 0;
                        MemorySegment at = null;
                        if (flip) {
                            long[] src = (long[]) args[1];
                            // an exponent bit of the first K element of the first position sent
                            at = MemorySegment.ofAddress(src[0] + 3).reinterpret(1);
                            at.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0,
                                    (byte) (at.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) ^ 0x40));
                        }
                        try {
                            return m.invoke(real, args);
                        } catch (InvocationTargetException e) {
                            throw e.getCause();
                        } finally {
                            if (at != null) {
                                at.set(java.lang.foreign.ValueLayout.JAVA_BYTE, 0,
                                        (byte) (at.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) ^ 0x40));
                            }
                        }
                    });
        };
        try (Rig rig = new Rig(f32, f32, corrupting)) {
            int[] p = prompt(7, 40);
            int[] want = rig.single("s", p);
            SimProxy.Exchange x = rig.disagg("r", p);
            // both completed (D decodes whatever KV it holds, as a real model does) ...
            assertTrue(x.prefill().ok() && x.decode().ok(), x.toString());
            assertTrue(writes.get() >= 1, "a write carried the prompt's KV");
            assertFalse(Arrays.equals(want, x.decode().outputTokens()),
                    "... but a changed KV byte must change D's tokens: " + Arrays.toString(want));
        }
    }

    @Test
    void dRefusesThePromptOfAModelWithTheSameKvShapes() throws Exception {
        // the same shapes, other weights: blocks of the same length, which the connector would move;
        // P's layout in the D request's kv_transfer_params tells them apart
        TinyModelWriter.write(dir.resolve("tiny-26"), TinyModelWriter.Shape.tiny().withSeed(26));
        TinyModelWriter.write(dir.resolve("tiny-copy"), TinyModelWriter.Shape.tiny());
        try (JlamaModel other = JlamaModel.load(dir.resolve("tiny-26"), "F32");
             JlamaModel copy = JlamaModel.load(dir.resolve("tiny-copy"), "F32");
             Rig rig = new Rig(f32, other, null)) {
            assertEquals(f32.kvShape(BLOCK), other.kvShape(BLOCK), "byte-identical KV shapes");
            assertEquals(f32.kvLayout(), copy.kvLayout(), "the same checkpoint elsewhere has the same layout");
            assertFalse(f32.kvLayout().equals(other.kvLayout()), f32.kvLayout());
            java.util.Map<String, Object> params = new java.util.HashMap<>(
                    SimProxy.decodeParams("xfer-other", rig.proxy.remoteEngineId(), rig.proxy.bootstrapUrl()));
            params.put(SimEngine.KV_LAYOUT_PARAM, rig.p.kvLayout());
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> rig.d.submit("r-other", prompt(14, 40), DECODE, params));
            assertTrue(e.getMessage().contains("KV layout " + rig.p.kvLayout())
                    && e.getMessage().contains(rig.d.kvLayout()) && e.getMessage().contains("(weights digest "),
                    e.getMessage());
            assertEquals(0, rig.d.snapshot().loadingRemoteKv(), "nothing was started");
            // the layout of the model D runs passes
            params.put(SimEngine.KV_LAYOUT_PARAM, rig.d.kvLayout());
            params.put("transfer_id", "xfer-same");
            rig.p.submit("p-same", prompt(14, 40), 1, SimProxy.prefillParams("xfer-same"));
            SimResult r = rig.d.submit("r-same", prompt(14, 40), DECODE, params).get(60, TimeUnit.SECONDS);
            assertTrue(r.ok(), r.toString());
        }
    }

    @Test
    void dRefusesKvOfAnotherLayout() throws Exception {
        // P works in F32, D in BF16: the connector's transfer planning sees KV regions of different
        // lengths and refuses the transfer; D fails the request instead of decoding foreign bytes
        try (JlamaModel bf16 = JlamaModel.load(dir.resolve("tiny"), "BF16");
             LogCapture log = LogCapture.start();
             Rig rig = new Rig(f32, bf16, null)) {
            SimProxy.Exchange x = rig.disagg("r", prompt(9, 40));
            assertFalse(x.decode().ok(), x.toString());
            assertNotNull(x.decode().error());
            assertTrue(x.decode().error().contains("KV load failed"), x.decode().error());
            assertFalse(log.matching(org.slf4j.event.Level.ERROR, "region length mismatch").isEmpty()
                    && log.matching(org.slf4j.event.Level.WARN, "region length mismatch").isEmpty(),
                    "the refusal names the mismatch");
        }
    }

    @Test
    void dRefusesKvOfAModelWithOtherHeads() throws Exception {
        // the same model family with 4 KV heads at D: blocks of another length, refused as above
        TinyModelWriter.write(dir.resolve("tiny-kv4"), TinyModelWriter.Shape.tiny().withKvHeads(4));
        try (JlamaModel kv4 = JlamaModel.load(dir.resolve("tiny-kv4"), "F32");
             LogCapture log = LogCapture.start();
             Rig rig = new Rig(f32, kv4, null)) {
            SimProxy.Exchange x = rig.disagg("r", prompt(10, 40));
            assertFalse(x.decode().ok(), x.toString());
            assertTrue(x.decode().error().contains("KV load failed"), x.decode().error());
            assertFalse(log.matching(org.slf4j.event.Level.ERROR, "region length mismatch").isEmpty()
                    && log.matching(org.slf4j.event.Level.WARN, "region length mismatch").isEmpty(),
                    "the refusal names the mismatch");
        }
    }
}
