package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.cudaipc.CudaIpcTransport;
import io.mooncake4j.engine.cudaipc.FakeIpcDriver;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * The engine core with cuda-ipc (over {@link FakeIpcDriver}) and the real tcp transport (staging
 * through {@link FakeDeviceMemory}): two engines in one JVM standing for two processes on one
 * machine. GPU-to-GPU requests go by cuda-ipc, a handle that will not open falls back to tcp once
 * (counted, logged once), {@code MC_TRANSPORTS} can leave cuda-ipc out, closing an engine closes
 * its handles.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CudaIpcSelectionTest {

    private static final long LEN = 1 << 20;

    private FakeDeviceMemory gpus;
    private FakeIpcDriver.Machine machine;
    private FakeDeviceMemory.DeviceBuffer localGpu;
    private FakeDeviceMemory.DeviceBuffer remoteGpu;
    private FakeIpcDriver initiatorDriver;
    private FakeIpcDriver targetDriver;

    @BeforeEach
    void setUp() {
        gpus = new FakeDeviceMemory(2);
        machine = new FakeIpcDriver.Machine(gpus, 2);
        localGpu = gpus.allocate(0, LEN);
        remoteGpu = gpus.allocate(1, LEN);
        initiatorDriver = new FakeIpcDriver(machine, "initiator").own(localGpu);
        targetDriver = new FakeIpcDriver(machine, "target").own(remoteGpu);
        MemorySegment src = localGpu.contents();
        for (long i = 0; i < LEN; i += 8) {
            src.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
        }
    }

    @AfterEach
    void tearDown() {
        gpus.close();
    }

    private CoreEngine engine(FakeIpcDriver driver, Map<String, String> env) {
        TcpConfig tcp = TcpEngines.config();
        CoreEngine e = new EngineBuilder().settings(TcpTransport.engineSettings(tcp)).environment(env).offer(
                new TransportFactory(CudaIpcTransport.DECLARATION, () -> new CudaIpcTransport(driver)),
                new TransportFactory(TcpTransport.DECLARATION, () -> new TcpTransport(tcp, gpus, new StagingConfig(64 << 10, 2, 4)))).build();
        if (e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", "") != 0) {
            String why = e.lastError();
            e.close();
            throw new AssertionError("initialize failed: " + why);
        }
        return e;
    }

    private static int write(CoreEngine from, CoreEngine to, long src, long dst, long len) {
        return from.batchTransferSyncWrite(to.getLocalSegmentName(), new long[] {src}, new long[] {dst},
                new long[] {len});
    }

    private void assertArrived() {
        assertArrayEquals(localGpu.contents().toArray(ValueLayout.JAVA_BYTE),
                remoteGpu.contents().toArray(ValueLayout.JAVA_BYTE));
    }

    private void register(CoreEngine a, CoreEngine b) {
        assertEquals(0, a.registerMemory(localGpu.address(), LEN, "cuda:0"));
        assertEquals(0, b.registerMemory(remoteGpu.address(), LEN, "cuda:1"));
    }

    @Test
    void gpuToGpuBetweenTwoEnginesGoesByCudaIpcBothWays() {
        try (CoreEngine a = engine(initiatorDriver, Map.of()); CoreEngine b = engine(targetDriver, Map.of())) {
            assertEquals(List.of("cuda-ipc", "tcp"), a.transportNames());
            register(a, b);
            assertEquals(0, write(a, b, localGpu.address(), remoteGpu.address(), LEN));
            assertArrived();
            localGpu.contents().fill((byte) 0);
            assertEquals(0, a.batchTransferSyncRead(b.getLocalSegmentName(), new long[] {localGpu.address() + 100},
                    new long[] {remoteGpu.address() + 100}, new long[] {LEN - 200}));
            assertArrayEquals(remoteGpu.contents().asSlice(100, LEN - 200).toArray(ValueLayout.JAVA_BYTE),
                    localGpu.contents().asSlice(100, LEN - 200).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(Map.of("cuda-ipc", 2 * LEN - 200, "tcp", 0L), a.bytesByTransport());
            assertEquals(0, ((TcpTransport) b.transport("tcp")).openDataSessions(), "no TCP data connection");
            assertEquals(1, initiatorDriver.opens());
            assertEquals(0, a.fallbackSlices());
            assertEquals(List.of(), initiatorDriver.violations());
        }
        assertEquals(initiatorDriver.opens(), initiatorDriver.closes(), "closing the engine closed its handles");
        assertEquals(0, initiatorDriver.liveAliases());
    }

    @Test
    void manyThreadsAtOnceOpenTheHandleOnce() throws Exception {
        try (CoreEngine a = engine(initiatorDriver, Map.of()); CoreEngine b = engine(targetDriver, Map.of())) {
            register(a, b);
            ExecutorService pool = Executors.newFixedThreadPool(4);
            try {
                List<Future<Integer>> rcs = new ArrayList<>();
                long chunk = LEN / 16;
                for (int k = 0; k < 16; k++) {
                    long off = k * chunk;
                    rcs.add(pool.submit(() -> write(a, b, localGpu.address() + off, remoteGpu.address() + off, chunk)));
                }
                for (Future<Integer> f : rcs) {
                    assertEquals(0, f.get());
                }
            } finally {
                pool.shutdownNow();
            }
            assertArrived();
            assertEquals(1, initiatorDriver.opens());
            assertEquals(List.of(), initiatorDriver.violations());
        }
    }

    @Test
    void aHandleThatWillNotOpenFallsBackToTcpOnceCountedAndLoggedOnce() {
        initiatorDriver.refuseOpens("CUDA_ERROR_MAP_FAILED (another container?)");
        try (CoreEngine a = engine(initiatorDriver, Map.of()); CoreEngine b = engine(targetDriver, Map.of());
                LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            register(a, b);
            assertEquals(0, write(a, b, localGpu.address(), remoteGpu.address(), LEN));
            assertArrived();
            assertEquals(1, a.fallbackSlices());
            remoteGpu.contents().fill((byte) 0);
            assertEquals(0, write(a, b, localGpu.address(), remoteGpu.address(), LEN));
            assertArrived();
            assertEquals(1, a.fallbackSlices(), "known unreachable over cuda-ipc: routed to tcp directly");
            assertEquals(Map.of("cuda-ipc", LEN, "tcp", 2 * LEN), a.bytesByTransport());
            assertEquals(1, logs.matching(Level.WARN, "CUDA_ERROR_MAP_FAILED").size(), "logged once per peer");
            assertTrue(((TcpTransport) b.transport("tcp")).openDataSessions() > 0, "the bytes came over TCP");
        }
    }

    @Test
    void mcTransportsCanLeaveCudaIpcOutAndHostMemoryNeverTakesIt() {
        try (CoreEngine a = engine(initiatorDriver, Map.of("MC_TRANSPORTS", "tcp"));
                CoreEngine b = engine(targetDriver, Map.of())) {
            assertEquals(List.of("tcp"), a.transportNames());
            register(a, b);
            assertEquals(0, write(a, b, localGpu.address(), remoteGpu.address(), LEN));
            assertArrived();
            assertEquals(0, initiatorDriver.opens());
        }
        try (CoreEngine a = engine(initiatorDriver, Map.of()); CoreEngine b = engine(targetDriver, Map.of());
                var host = new io.mooncake4j.memory.HostMemoryAllocator()) {
            var src = host.allocate(4096);
            var dst = host.allocate(4096);
            src.segment().fill((byte) 5);
            assertEquals(0, a.registerMemory(src.address(), 4096, "cpu:0"));
            assertEquals(0, b.registerMemory(dst.address(), 4096, "cpu:0"));
            assertEquals(0, write(a, b, src.address(), dst.address(), 4096));
            assertEquals(-1, dst.segment().mismatch(src.segment()));
            assertEquals(Map.of("cuda-ipc", 0L, "tcp", 4096L), a.bytesByTransport());
        }
    }

    @Test
    void withoutCudaTheTransportIsSkippedAndTcpCarriesOn() {
        initiatorDriver.unavailable("no NVIDIA driver");
        try (CoreEngine a = engine(initiatorDriver, Map.of())) {
            assertEquals(List.of("tcp"), a.transportNames());
        }
    }
}
