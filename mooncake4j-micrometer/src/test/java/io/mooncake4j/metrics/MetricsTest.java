package io.mooncake4j.metrics;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.rdma.RdmaEngineConfig;
import io.mooncake4j.engine.rdma.RdmaTransport;
import io.mooncake4j.engine.shm.ShmTransport;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.engine.tcp.TcpWire;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MetricsTest {

    private static double count(MeterRegistry r, String name, String... tags) {
        return r.get(name).tags(tags).counter().count();
    }

    @Test
    void connectorStatsUnderVllmNames() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        MooncakeConnectorMetrics metrics = new MooncakeConnectorMetrics(Tags.of("engine", "p0"));
        metrics.bindTo(registry);
        MooncakeKvConnectorStats stats = new MooncakeKvConnectorStats();
        stats.recordTransfer(0.002, 1 << 20, 32);
        stats.recordTransfer(0.004, 3 << 20, 64);
        stats.recordFailedTransfer();
        stats.recordKvExpiredReq();
        stats.recordKvExpiredReq();
        metrics.record(stats);
        MooncakeKvConnectorStats later = new MooncakeKvConnectorStats();
        later.recordFailedRecv();
        metrics.record(later);

        Timer t = registry.get(MooncakeConnectorMetrics.XFER_TIME).tag("engine", "p0").timer();
        assertEquals(2, t.count());
        assertEquals(6.0, t.totalTime(TimeUnit.MILLISECONDS), 1e-6);
        assertEquals(4 << 20, registry.get(MooncakeConnectorMetrics.BYTES).summary().totalAmount(), 1e-6);
        assertEquals(96, registry.get(MooncakeConnectorMetrics.DESCRIPTORS).summary().totalAmount(), 1e-6);
        assertEquals(1, count(registry, MooncakeConnectorMetrics.FAILED_TRANSFERS));
        assertEquals(1, count(registry, MooncakeConnectorMetrics.FAILED_RECVS));
        assertEquals(2, count(registry, MooncakeConnectorMetrics.EXPIRED));
    }

    @Test
    void theEngineDecoratorCountsTransfersBytesFailuresAndTheBatchLimit() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        ScriptedTransferEngine scripted = new ScriptedTransferEngine();
        scripted.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).failNthCall(2, -1);
        try (MeteredTransferEngine e = new MeteredTransferEngine(scripted, registry, Tags.of("engine", "p0"))) {
            e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "");
            assertEquals(0, e.batchTransferSyncWrite("peer", new long[] {1, 2}, new long[] {3, 4}, new long[] {10, 20}));
            assertEquals(-1, e.batchTransferSyncWrite("peer", new long[] {1}, new long[] {3}, new long[] {10}));
            assertEquals(0, e.batchTransferSyncRead("peer", new long[] {1}, new long[] {3}, new long[] {7}));
            long batch = e.allocateBatchId(2);
            TransferRequest r = new TransferRequest(TransferRequest.Opcode.READ, 0x1000, 0, 0x2000, 100);
            assertEquals(StatusCodes.OK, e.submitTransfer(batch, List.of(r, r)));
            assertEquals(StatusCodes.TOO_MANY_REQUESTS, e.submitTransfer(batch, List.of(r)));
            scripted.scriptTransferStatus((b, task, actual) -> task == 1
                    ? new TransferStatus(0, TransferStatus.State.FAILED, 0) : actual);
            for (int poll = 0; poll < 3; poll++) { // counted once each, however often polled
                e.getTransferStatus(batch, 0);
                e.getTransferStatus(batch, 1);
            }
            assertEquals(StatusCodes.OK, e.freeBatchId(batch));
        }
        assertEquals(3, count(registry, MeteredTransferEngine.TRANSFERS, "op", "write"));
        assertEquals(3, count(registry, MeteredTransferEngine.TRANSFERS, "op", "read"));
        assertEquals(30, count(registry, MeteredTransferEngine.BYTES, "op", "write"));
        assertEquals(107, count(registry, MeteredTransferEngine.BYTES, "op", "read"));
        assertEquals(1, count(registry, MeteredTransferEngine.FAILURES, "api", "sync"));
        assertEquals(1, count(registry, MeteredTransferEngine.FAILURES, "api", "batch"));
        assertEquals(1, count(registry, MeteredTransferEngine.LIMITS_HIT));
        assertEquals(true, scripted.isClosed());
    }

    private static double functionCount(MeterRegistry r, String name, String... tags) {
        return r.get(name).tags(tags).functionCounter().count();
    }

    /**
     * The core as {@code TransferEngines.create("auto")} builds it (shm, rdma where usable, tcp),
     * but on OS-assigned loopback ports.
     */
    private static CoreEngine autoEngine() {
        TcpConfig tcp = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
        return new EngineBuilder().settings(TcpTransport.engineSettings(tcp)).environment(Map.of()).offer(
                new TransportFactory(ShmTransport.DECLARATION, ShmTransport::new),
                RdmaTransport.factory(RdmaEngineConfig.fromSettings(EngineSettings.fromEnvironment())),
                new TransportFactory(TcpTransport.DECLARATION, () -> new TcpTransport(tcp))).build();
    }

    @Test
    void theEngineDecoratorReadsTheCountersOfAnAutoEngine() throws IOException {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                MeteredTransferEngine e = new MeteredTransferEngine(autoEngine(), registry, Tags.of("engine", "p0"))) {
            assertEquals(0, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "auto", ""));
            HostMemoryStorage buf = alloc.allocate(1 << 16);
            assertEquals(0, e.registerMemory(buf.address(), 1 << 16, "cpu:0"));
            assertEquals(0, functionCount(registry, MeteredTransferEngine.REJECTED_REQUESTS, "server", "data"));

            // a raw peer writes 64 bytes that end past the registered buffer: the data port refuses
            PeerAddress rpc = new PeerAddress("127.0.0.1", e.getRpcPort());
            int dataPort = new HandshakeClient(HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()))
                    .fetchDescriptor(rpc, "{}\n").tcpDataPort();
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", dataPort), 5000);
                s.setSoTimeout(10_000);
                s.getOutputStream().write(TcpWire.header(64, buf.address() + (1 << 16) - 32, 0x81));
                s.getOutputStream().write(new byte[64]);
                assertArrayEquals(TcpWire.status(TcpWire.STATUS_ADDR_REJECTED), s.getInputStream().readAllBytes());
            }
            assertEquals(1, functionCount(registry, MeteredTransferEngine.REJECTED_REQUESTS, "server", "data"));
            assertEquals(1, e.counters().rejectedDataRequests());

            // a frame with an invalid type byte on the RPC port: the handshake server drops it
            assertEquals(0, functionCount(registry, MeteredTransferEngine.REJECTED_REQUESTS, "server", "handshake"));
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", e.getRpcPort()), 5000);
                s.setSoTimeout(10_000);
                s.getOutputStream().write(new byte[] {4, 0, 0, 0, 0, 0, 0, 0, (byte) 0x80, '{', '}', '\n'});
                s.shutdownOutput();
                assertEquals(0, s.getInputStream().readAllBytes().length);
            }
            assertEquals(1, functionCount(registry, MeteredTransferEngine.REJECTED_REQUESTS, "server", "handshake"));
            assertEquals(0, functionCount(registry, MeteredTransferEngine.CAP_REFUSALS, "cap", "segments"));
            assertEquals(0, functionCount(registry, MeteredTransferEngine.UNROUTABLE_SLICES));
        }
    }

    @Test
    void anEngineThatCountsNothingReadsZero() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (MeteredTransferEngine e = new MeteredTransferEngine(new ScriptedTransferEngine(), registry, Tags.empty())) {
            assertEquals(0, functionCount(registry, MeteredTransferEngine.REJECTED_REQUESTS, "server", "data"));
            assertEquals(0, functionCount(registry, MeteredTransferEngine.CLOSED_CONNECTIONS,
                    "server", "handshake", "reason", "cap"));
            assertEquals(0, functionCount(registry, MeteredTransferEngine.FALLBACK_SLICES));
            assertEquals(EngineCounters.NONE, e.counters());
        }
    }
}
