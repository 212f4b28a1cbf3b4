package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpEngines;
import io.mooncake4j.memory.DeviceMemory.Direction;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import java.net.InetAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The connector moving GPU-resident KV caches between a prefill and a decode worker over the real
 * TCP engine, with {@link FakeDeviceMemory} standing in for CUDA: P's blocks leave through
 * device-to-host staging, D's arrive through host-to-device staging, and neither engine ever
 * touches the (unreadable) GPU memory itself.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GpuTcpEndToEndTest {

    @Test
    void decodeReceivesEveryByteOfGpuKvCachesOverTheTcpEngine() {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(1)) {
            TcpConfig cfg = TcpConfig.fromEnvironment(Map.of(),
                    HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
            try (PdTestbed bed = new PdTestbed().engines(() -> TcpEngines.alone(cfg, fake))
                    .memory(bytes -> fake.allocate(0, bytes), fake::hostView)) {
                PdTestbed.Node p = bed.producer("P", 0, 1, null);
                PdTestbed.Node d = bed.consumer("D", 0, 1);
                assertEquals(DeviceMemoryAccess.Kind.STAGED,
                        p.worker.registeredPlan().deviceAccess().get("cuda:0").kind());
                p.fill(1, 2, 3, 17);
                p.step(announce("p1", "X"));
                p.step(finished("p1", "X", 1, 2, 3, 17));
                d.step(pull("d1", "X", "P", p.bootstrapUrl(), 40, 41, 50, 2));
                bed.awaitAll(() -> d.finishedRecving.contains("d1") && p.finishedSending.contains("p1"),
                        Duration.ofSeconds(30), "GPU-to-GPU transfer over TCP");
                PdTestbed.assertSameTpCopy(p, 1, d, 40);
                PdTestbed.assertSameTpCopy(p, 2, d, 41);
                PdTestbed.assertSameTpCopy(p, 3, d, 50);
                PdTestbed.assertSameTpCopy(p, 17, d, 2);
                assertTrue(d.blocksWithLoadErrors.isEmpty());
                long moved = 4L * d.page() * PdTestbed.MODEL.numLayers();
                assertEquals(moved, fake.bytes(Direction.DEVICE_TO_HOST), "P sent from GPU memory");
                assertEquals(moved, fake.bytes(Direction.HOST_TO_DEVICE), "D received into GPU memory");
                assertEquals(List.of(), fake.violations());
            }
        }
    }
}
