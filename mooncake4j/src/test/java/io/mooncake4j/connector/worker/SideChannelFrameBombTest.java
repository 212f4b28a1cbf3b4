package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.fuzz.ZmtpPeer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A peer must not make P allocate what it declares: a ZMTP peer that declares a ~1 GiB frame. The side channel's ZMTP checks the
 * declared size against the maximum message size on the frame header, before it allocates, so the peer
 * is dropped and nothing is allocated; the node keeps serving others.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class SideChannelFrameBombTest {

    private static final long GIB = 1L << 30;
    private static final Duration READ = Duration.ofSeconds(10);

    /** One healthy pull p → d of P block {@code pBlock} into D block {@code dBlock}, bytes verified. */
    static void healthyPull(PdTestbed bed, PdTestbed.Node p, PdTestbed.Node d, String id, int pBlock, int dBlock) {
        p.fill(pBlock);
        p.step(announce("p-" + id, "X-" + id));
        p.step(finished("p-" + id, "X-" + id, pBlock));
        d.step(pull("d-" + id, "X-" + id, "P", p.bootstrapUrl(), dBlock));
        bed.awaitAll(() -> d.finishedRecving.contains("d-" + id) && p.finishedSending.contains("p-" + id),
                Duration.ofSeconds(30), "healthy pull " + id);
        PdTestbed.assertSameTpCopy(p, pBlock, d, dBlock);
    }

    @Test
    void producerDropsAPeerThatDeclaresAGibibyteFrameAndKeepsServing() throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            long heapBefore = usedHeap();
            for (int i = 0; i < 3; i++) {
                try (ZmtpPeer z = ZmtpPeer.connect(p.worker.sideChannelPort(), READ)) {
                    z.handshake("DEALER");
                    z.write(ZmtpPeer.longHeader(0, GIB));
                    assertTrue(z.closedByPeer(), "P drops a peer whose frame header declares 1 GiB");
                }
            }
            assertTrue(usedHeap() - heapBefore < GIB / 2, "no frame of the declared size was allocated");
            healthyPull(bed, p, d, "after-bomb", 5, 9);
            assertTrue(d.blocksWithLoadErrors.isEmpty());
            assertTrue(p.worker.health().healthy(), p.worker.health().toString());
            assertEquals(0, p.worker.health().loopDeaths());
        }
    }

    @Test
    void producerSurvivesAFrameHeaderAbove2To63AndKeepsServing() throws Exception {
        // a size read as a signed long is negative here (JeroMQ 0.6.0 fell for it: its I/O thread threw and
        // its ROUTER went deaf); the ROUTER rejects the header (no valid size has its top bit set) and drops
        // the peer
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (ZmtpPeer z = ZmtpPeer.connect(p.worker.sideChannelPort(), READ)) {
                z.handshake("DEALER");
                z.write(ZmtpPeer.longHeader(ZmtpPeer.MORE, 0xA1B2C3D4E5F60718L)); // (int) is negative
                z.write(ZmtpPeer.longHeader(0, 0x8000000012345678L)); // (int) is 305 MB, above the limit
                assertTrue(z.closedByPeer(), "the ROUTER drops a peer whose frame size has its top bit set");
                bed.awaitAll(() -> p.worker.listenerStats().peersDropped() == 1, Duration.ofSeconds(10),
                        "the drop is counted");
            }
            healthyPull(bed, p, d, "after-negative", 5, 6);
            assertTrue(p.worker.health().healthy());
        }
    }

    @Test
    void producerMaximumMessageSizeIsConfigurable() throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null,
                    b -> b.sideChannelLimits(SideChannelLimits.DEFAULTS.withMaxMetadataBytes(1024)));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (ZmtpPeer z = ZmtpPeer.connect(p.worker.sideChannelPort(), READ)) {
                z.handshake("DEALER");
                z.write(ZmtpPeer.frame(0, new byte[2048])); // a real 2 KiB frame, above the 1 KiB limit
                assertTrue(z.closedByPeer(), "P drops a peer whose frame exceeds maxMetadataBytes");
            }
            healthyPull(bed, p, d, "small-limit", 3, 4); // D's real metadata for TINY is below 1 KiB
        }
    }

    @Test
    void decodeDropsAPrefillThatDeclaresAGibibyteFrameAndKeepsPulling() throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(10));
                MooncakeBootstrapServer fakeBootstrap = new MooncakeBootstrapServer("127.0.0.1", 0);
                ServerSocket fakeP = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            fakeBootstrap.start();
            String url = "http://127.0.0.1:" + fakeBootstrap.port();
            try (BootstrapClient c = new BootstrapClient()) {
                c.register(url, new RegisterWorkerPayload("FAKE", 0, 0, 0,
                        BootstrapAddresses.tcpAddress("127.0.0.1", fakeP.getLocalPort())), Duration.ofSeconds(10));
            }
            d.step(pull("d-fake", "Y", "FAKE", url, 7));
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fakeP, "ROUTER", Duration.ofSeconds(20))) {
                z.readFrame(); // D's metadata
                fakeP.close(); // the fake P accepts nobody else: D's reconnect is refused
                z.write(ZmtpPeer.longHeader(0, GIB));
                assertTrue(z.closedByPeer(), "D drops a P whose frame header declares 1 GiB");
            }
            bed.awaitAll(() -> d.blocksWithLoadErrors.contains(7), Duration.ofSeconds(30), "the fake pull failed");
            healthyPull(bed, p, d, "after-bomb", 2, 3);
            assertTrue(d.worker.health().healthy(), d.worker.health().toString());
            assertEquals(0, d.worker.health().loopDeaths());
        }
    }

    @Test
    void decodeWaitsForItsDeadlineWhenAPrefillThatBrokeTheProtocolStillAcceptsConnections() throws Exception {
        // P may be alive and could still write this pull's blocks: D must not declare them failed early
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(5));
                MooncakeBootstrapServer fakeBootstrap = new MooncakeBootstrapServer("127.0.0.1", 0);
                ServerSocket fakeP = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            PdTestbed.Node d = bed.node(KvRole.KV_CONSUMER, "D", 0, 1, null,
                    b -> b.receiveTimeoutMargin(Duration.ofMillis(500))); // receive deadline 5.5 s
            fakeBootstrap.start();
            String url = "http://127.0.0.1:" + fakeBootstrap.port();
            try (BootstrapClient c = new BootstrapClient()) {
                c.register(url, new RegisterWorkerPayload("FAKE", 0, 0, 0,
                        BootstrapAddresses.tcpAddress("127.0.0.1", fakeP.getLocalPort())), Duration.ofSeconds(10));
            }
            // the receive deadline runs from the pull's start, not from the protocol error (the handshake before
            // it takes a while on a loaded machine): measure from before the pull
            long t0 = System.nanoTime();
            d.step(pull("d-fake", "Y", "FAKE", url, 7));
            long errorMs;
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fakeP, "ROUTER", Duration.ofSeconds(20))) {
                z.readFrame(); // D's metadata
                errorMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                z.write(ZmtpPeer.longHeader(0, GIB));
                assertTrue(z.closedByPeer(), "D drops a P whose frame header declares 1 GiB");
            }
            // fakeP stays open: the port still accepts connections (the probe's)
            bed.awaitAll(() -> d.blocksWithLoadErrors.contains(7), Duration.ofSeconds(30), "the fake pull failed");
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(ms >= 5_400, "failed only at the 5.5 s receive deadline, not at the protocol error (at "
                    + errorMs + " ms): " + ms + " ms");
        }
    }

    private static long usedHeap() {
        Runtime r = Runtime.getRuntime();
        return r.totalMemory() - r.freeMemory();
    }
}
