package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import zmq.msg.MsgAllocator;
import zmq.msg.MsgAllocatorHeap;

/**
 * Issue 9, "no silent death": a watched thread that dies is logged once, counted in
 * {@link MooncakeConnectorWorker#health()}, and either rebuilt (our loops; D's JeroMQ context) or
 * reported as unrecoverable (a JeroMQ I/O thread of P's ROUTER keeps its port). JeroMQ's I/O threads
 * are killed for real: a message allocator that throws {@link OutOfMemoryError} for large frames runs
 * on them, as JeroMQ's own allocation did in the frame-size bomb (those two tests run on
 * {@code side_channel_zmq: jeromq}; the loop watchdogs run on both implementations).
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LoopWatchdogTest {

    private static final Duration WAIT = Duration.ofSeconds(20);

    /** Throws OutOfMemoryError for frames above 100 kB, on whichever JeroMQ I/O thread decodes them. */
    private static MsgAllocator ioKiller() {
        MsgAllocatorHeap heap = new MsgAllocatorHeap();
        return size -> {
            if (size > 100_000) {
                throw new OutOfMemoryError("injected: a frame of " + size + " bytes");
            }
            return heap.allocate(size);
        };
    }

    @ParameterizedTest
    @ValueSource(strings = {"builtin", "jeromq"})
    void aListenerThatDiesIsReportedAndItsRouterIsRecreatedOnTheSamePort(String impl) {
        try (PdTestbed bed = new PdTestbed().sideChannel(impl).abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            SideChannelFrameBombTest.healthyPull(bed, p, d, "before", 1, 2);
            int port = p.worker.sideChannelPort();
            p.worker.listenerOrNull().injectFault(new OutOfMemoryError("injected into the listener loop"));
            bed.awaitAll(() -> p.worker.health().loopRecoveries() == 1, WAIT, "listener recreated");
            WorkerHealth h = p.worker.health();
            assertEquals(1, h.loopDeaths());
            assertTrue(h.healthy(), h.toString());
            assertEquals(port, p.worker.sideChannelPort());
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after", 3, 4);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"builtin", "jeromq"})
    void aPullIoThreadThatDiesIsReportedAndLaterPullsWork(String impl) {
        try (PdTestbed bed = new PdTestbed().sideChannel(impl).abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            SideChannelFrameBombTest.healthyPull(bed, p, d, "before", 1, 2);
            d.worker.receiverOrNull().channels().injectFault(new OutOfMemoryError("injected into the pull I/O loop"));
            bed.awaitAll(() -> d.worker.health().loopRecoveries() == 1, WAIT, "pull I/O recovered");
            assertEquals(1, d.worker.health().loopDeaths());
            assertTrue(d.worker.health().healthy(), d.worker.health().toString());
            assertTrue(d.worker.receiverOrNull().channels().alive());
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after", 3, 4);
        }
    }

    @Test
    void aDeadJeroMqIoThreadOnTheProducerMakesTheWorkerUnhealthyLoudly() throws Exception {
        try (PdTestbed bed = new PdTestbed().sideChannel("jeromq").abortTimeout(Duration.ofSeconds(10))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.zmqAllocator(ioKiller()));
            assertTrue(p.worker.health().healthy());
            try (ZmtpPeer z = ZmtpPeer.connect(p.worker.sideChannelPort(), Duration.ofSeconds(10))) {
                z.handshake("DEALER");
                z.write(ZmtpPeer.longHeader(0, 200_000));
                bed.awaitAll(() -> !p.worker.health().healthy(), WAIT, "P reports the dead I/O thread");
            }
            WorkerHealth h = p.worker.health();
            assertEquals(1, h.loopDeaths());
            assertEquals(0, h.loopRecoveries());
            assertTrue(h.problems().getFirst().contains("JeroMQ I/O thread"), h.toString());
            assertTrue(h.problems().getFirst().contains("OutOfMemoryError"), h.toString());
        }
    }

    @Test
    void aDeadJeroMqIoThreadOnTheConsumerIsReplacedAndLaterPullsWork() throws Exception {
        try (PdTestbed bed = new PdTestbed().sideChannel("jeromq").abortTimeout(Duration.ofSeconds(10));
                MooncakeBootstrapServer fakeBootstrap = new MooncakeBootstrapServer("127.0.0.1", 0);
                ServerSocket fakeP = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.node(KvRole.KV_CONSUMER, "D", 0, 1, null, b -> b.zmqAllocator(ioKiller()));
            fakeBootstrap.start();
            String url = "http://127.0.0.1:" + fakeBootstrap.port();
            try (BootstrapClient c = new BootstrapClient()) {
                c.register(url, new RegisterWorkerPayload("FAKE", 0, 0, 0,
                        BootstrapAddresses.tcpAddress("127.0.0.1", fakeP.getLocalPort())), Duration.ofSeconds(10));
            }
            d.step(pull("d-fake", "Y", "FAKE", url, 7));
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fakeP, "ROUTER", WAIT)) {
                z.readFrame(); // D's metadata
                z.write(ZmtpPeer.longHeader(0, 200_000));
                bed.awaitAll(() -> d.worker.health().loopRecoveries() == 1, WAIT, "D replaced its context");
            }
            bed.awaitAll(() -> d.blocksWithLoadErrors.contains(7), WAIT, "the pull in flight failed");
            assertEquals(1, d.worker.health().loopDeaths());
            assertTrue(d.worker.health().healthy(), d.worker.health().toString());
            SideChannelFrameBombTest.healthyPull(bed, p, d, "after", 3, 4);
            assertFalse(d.blocksWithLoadErrors.contains(4));
        }
    }
}
