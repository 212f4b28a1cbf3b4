package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ThreadLocalRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The demo's GPU path without a GPU: KV caches in {@link FakeDeviceMemory} (host-untouchable
 * mappings that only its copy queues reach), the synthetic model writing and verifying through
 * copies, and real TCP engines staging the fake GPU memory between P and D.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GpuDemoTest {

    private static final ModelPreset TINY = ModelPreset.TINY;

    private static int[] tokens(int n, int salt) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = (i * 37 + salt) % 1000;
        }
        return t;
    }

    private static byte[] hostBlock(KvCaches c, String layer, int b) {
        KvCacheTensor t = c.tensorsByLayer().get(layer).getFirst();
        MemorySegment s = t.storage().hostSegment().orElseThrow();
        return s.asSlice(t.blockAddress(b) - t.storage().address(), t.blockBytes()).toArray(ValueLayout.JAVA_BYTE);
    }

    private static byte[] fakeBlock(FakeDeviceMemory fake, KvCaches c, String layer, int b) {
        KvCacheTensor t = c.tensorsByLayer().get(layer).getFirst();
        return fake.hostView(t.blockAddress(b)).reinterpret(t.blockBytes()).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void modelOnGpuMemoryWritesTheSameBlocksAsOnHostThroughBulkCopies() {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(1).withCopyDelay(
                () -> ThreadLocalRandom.current().nextLong(20_000));
             HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            KvCaches host = KvCaches.allocate(TINY, 1, 12, KvCacheLayout.FUSED, alloc::allocate);
            KvCaches gpu = KvCaches.allocate(TINY, 1, 12, KvCacheLayout.FUSED, bytes -> fake.allocate(0, bytes));
            SyntheticModel h = new SyntheticModel(TINY, 1, 0, host);
            try (SyntheticModel g = new SyntheticModel(TINY, 1, 0, gpu, fake)) {
                assertTrue(g.onDevice());
                long[] hashes = SyntheticModel.prefixHashes(tokens(90, 1));
                // blocks 3,4,5 consecutive (one copy per layer), then 9, 0, 1: partial first and last blocks
                int[][] blocks = {{3, 4, 5, 9, 0, 1}};
                for (int[] step : new int[][] {{0, 7}, {7, 61}, {61, 62}, {62, 90}}) {
                    h.forward(hashes, blocks, step[0], step[1]);
                    g.forward(hashes, blocks, step[0], step[1]);
                }
                for (int l = 0; l < TINY.numLayers(); l++) {
                    for (int b : blocks[0]) {
                        assertArrayEquals(hostBlock(host, TINY.layerName(l), b), fakeBlock(fake, gpu, TINY.layerName(l), b),
                                "layer " + l + " block " + b);
                    }
                }
                SyntheticModel.Verification v = g.verify(hashes, blocks, 0, 90);
                assertTrue(v.ok(), v.firstMismatch());
                assertEquals(90 * g.bytesPerToken(), v.bytesChecked());
                assertTrue(g.verify(hashes, blocks, 17, 33).ok(), "a range starting inside a block");

                // bulk, not per token: 4 forward calls x 4 layers, at most (1 run of whole blocks + 4 heads per
                // partial block x 2 partial blocks + a few runs) copies per layer and call
                long h2d = fake.copies(DeviceMemory.Direction.HOST_TO_DEVICE);
                assertTrue(h2d <= 4L * TINY.numLayers() * (4 + 2 * TINY.numKvHeads()), "H2D copies: " + h2d);
                assertTrue(h2d < 90L * TINY.numLayers(), "fewer copies than tokens x layers: " + h2d);
                assertTrue(fake.copies(DeviceMemory.Direction.DEVICE_TO_HOST) > 0);

                // the KV digest (serve's sampling) is the same through the GPU path: as written, and read back
                long hostDigest = h.kvDigest(hashes, blocks, 0, 90);
                assertEquals(hostDigest, v.digest());
                assertEquals(hostDigest, g.kvDigest(hashes, blocks, 0, 90));
                assertEquals(h.forwardWithDigest(hashes, blocks, 7, 61), g.forwardWithDigest(hashes, blocks, 7, 61));
                assertEquals(h.kvDigest(hashes, blocks, 7, 61), g.forwardWithDigest(hashes, blocks, 7, 61));

                // one flipped byte in GPU memory is found through the D2H path
                KvCacheTensor t = gpu.tensorsByLayer().get(TINY.layerName(1)).getFirst();
                MemorySegment dev = fake.hostView(t.blockAddress(9)).reinterpret(t.blockBytes());
                dev.set(ValueLayout.JAVA_BYTE, 100, (byte) (dev.get(ValueLayout.JAVA_BYTE, 100) ^ 1));
                SyntheticModel.Verification bad = g.verify(hashes, blocks, 0, 90);
                assertFalse(bad.ok());
                assertEquals(1, bad.badWords());
                assertNotEquals(hostDigest, bad.digest(), "the flipped byte changes the digest");
                assertTrue(bad.firstMismatch().contains("layer model.layers.1"), bad.firstMismatch());
            }
            assertEquals(List.of(), fake.violations(), "no copy touched memory it should not");
            assertEquals(0, fake.openQueues(), "the model's queue is closed");
            assertEquals(0, fake.pinnedBytesLive(), "the model's scratch is freed");
        }
    }

    @Test
    void modelRefusesGpuCachesWithoutDeviceMemoryOrAcrossDevices() {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(2)) {
            KvCaches gpu = KvCaches.allocate(TINY, 1, 2, KvCacheLayout.FUSED, bytes -> fake.allocate(0, bytes));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new SyntheticModel(TINY, 1, 0, gpu));
            assertTrue(e.getMessage().contains("needs a DeviceMemory"), e.getMessage());
            int[] n = {0};
            KvCaches mixed = KvCaches.allocate(TINY, 1, 2, KvCacheLayout.FUSED, bytes -> fake.allocate(n[0]++ % 2, bytes));
            e = assertThrows(IllegalArgumentException.class, () -> new SyntheticModel(TINY, 1, 0, mixed, fake));
            assertTrue(e.getMessage().contains("every layer of a rank in one place"), e.getMessage());
        }
    }

    /** Workers over real TCP engines (ephemeral loopback ports) whose GPU memory is {@code fake}. */
    private static DemoRunner.Workers tcpWorkers(FakeDeviceMemory fake, List<CoreEngine> engines) {
        return protocol -> ConnectorSimWorker.factory(cfg -> {
            TcpConfig c = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
            CoreEngine e = EngineBuilder.of(TcpTransport.engineSettings(c), TcpTransport.factory(c, fake));
            engines.add(e);
            return e;
        });
    }

    @Test
    void demoMovesAndVerifiesGpuResidentKvOverTcpWithBothSidesOnTheGpu() {
        List<CoreEngine> engines = new CopyOnWriteArrayList<>();
        try (FakeDeviceMemory fake = new FakeDeviceMemory(2)) {
            // P tp 2 on fake GPU 1, D tp 1 on fake GPU 0; tiny model, partial last blocks (70 tokens)
            DemoRunner.Options o = new DemoRunner.Options(TINY, 6, 70, 16, 3, 2, 1, "tcp", 40, 3, 7,
                    Duration.ofSeconds(40), "cuda", 1, 0);
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
            DemoRunner.Report r = DemoRunner.run(o, tcpWorkers(fake, engines), out, fake);
            r.print(out);
            String text = buf.toString(StandardCharsets.UTF_8);
            assertEquals(0, r.exitCode(), text);
            assertEquals(6, r.ok(), text);
            assertEquals(6L * 70 * TINY.numLayers() * TINY.numKvHeads() * 2 * 64 * 2, r.bytesVerified(),
                    "every prompt byte verified at D");
            assertEquals(0, r.mismatchedWords());
            assertTrue(r.bytesMoved() > 0);
            assertTrue(text.contains("GPU: P on cuda:1, D on cuda:0"), text);
            assertTrue(text.contains("KV in cuda:1") && text.contains("KV in cuda:0"), text);
            assertEquals(3, engines.size(), "two P ranks and one D rank");
            long staged = engines.stream().mapToLong(e -> TcpTransport.in(e).stagedBytes()).sum();
            assertTrue(staged >= r.bytesMoved(), "the KV crossed TCP through staging: " + staged);
            assertTrue(fake.copies(DeviceMemory.Direction.HOST_TO_DEVICE) > 0);
            assertTrue(fake.copies(DeviceMemory.Direction.DEVICE_TO_HOST) > 0);
            assertEquals(List.of(), fake.violations());
            assertEquals(0, fake.openQueues(), "every queue closed (models and engines)");
            assertEquals(0, fake.pinnedBytesLive(), "every scratch and bounce buffer freed");
        }
    }

    @Test
    void demoRefusesAnUnusableGpuBeforeStartingAnything() {
        String why = "CUDA is unavailable: no driver. Fix: install one";
        List<CoreEngine> engines = new CopyOnWriteArrayList<>();
        try (FakeDeviceMemory none = FakeDeviceMemory.unavailable(why)) {
            DemoRunner.Options o = new DemoRunner.Options(TINY, 1, 32, 0, 1, 1, 1, "tcp", 8, 1, 1,
                    Duration.ofSeconds(5), "cuda", 0, 0);
            RuntimeException e = assertThrows(RuntimeException.class,
                    () -> DemoRunner.run(o, tcpWorkers(none, engines), System.out, none));
            assertTrue(e.getMessage().contains("Fix: install one"), e.getMessage());
            assertEquals(0, engines.size(), "no engine created");
        }
        assertThrows(IllegalArgumentException.class, () -> new DemoRunner.Options(TINY, 1, 32, 0, 1, 1, 1, "mock", 8,
                1, 1, Duration.ofSeconds(5), "cuda", 0, 0), "the mock engine would touch GPU memory");
    }
}
