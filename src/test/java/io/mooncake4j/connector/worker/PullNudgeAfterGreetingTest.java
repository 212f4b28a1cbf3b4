package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.fuzz.ZmtpPeer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Flaky-suite regression (SideChannelFrameBombTest, LoopWatchdogTest: "Accept timed out"): JeroMQ
 * 0.6.0 reports {@code HANDSHAKE_PROTOCOL} and cancels its own handshake timer as soon as the peer's
 * greeting is read; a poller registration lost after that point (the rest of D's greeting, READY and
 * the request never written) used to stall the pull until its receive deadline, because the loop
 * stopped nudging JeroMQ's I/O thread at that event. The nudges now go on until the first answer.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PullNudgeAfterGreetingTest {

    @Test
    void aPullWhoseHandshakeIsDoneKeepsNudgingUntilItsFirstAnswer() throws Exception {
        HealthMonitor health = new HealthMonitor();
        BackgroundErrors errors = new BackgroundErrors(LoggerFactory.getLogger(PullNudgeAfterGreetingTest.class));
        try (PullChannels ch = new PullChannels(TimeUnit.SECONDS.toNanos(30), TimeUnit.SECONDS.toNanos(1), errors,
                SideChannelLimits.DEFAULTS, health, new zmq.msg.MsgAllocatorHeap(), a -> { });
                ServerSocket fakeP = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            CompletableFuture<String> outcome = new CompletableFuture<>();
            ch.submit("tcp://127.0.0.1:" + fakeP.getLocalPort(), new byte[] {1}, new PullChannels.Listener() {
                @Override
                public void onResponse(MooncakeXferResponse response) {
                    outcome.complete("answer");
                }

                @Override
                public void onFailure(String reason) {
                    outcome.complete(reason);
                }
            });
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fakeP, "ROUTER", Duration.ofSeconds(20))) {
                z.readFrame(); // the request: greetings and READY are done, and this P never answers
                long before = ch.pollerNudges();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (ch.pollerNudges() < before + 3 && System.nanoTime() - deadline < 0) {
                    java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
                }
                long after = ch.pollerNudges();
                assertTrue(after >= before + 3, "nudges after the handshake: " + (after - before));
                assertFalse(outcome.isDone(), "the pull still waits for its answer: " + outcome.getNow(null));
            }
        }
    }

    /** Submits a pull; the future completes with the answer's status or the failure's reason. */
    private static CompletableFuture<String> submit(PullChannels ch, String address) {
        CompletableFuture<String> outcome = new CompletableFuture<>();
        ch.submit(address, new byte[] {1}, new PullChannels.Listener() {
            @Override
            public void onResponse(MooncakeXferResponse response) {
                outcome.complete(response.status().name());
            }

            @Override
            public void onFailure(String reason) {
                outcome.complete(reason);
            }
        });
        return outcome;
    }

    /**
     * Issue 13: a nudge binds and closes a socket, work for JeroMQ's I/O and reaper threads while a
     * long write runs; a pull on a connection that already carried an answer does not need one (the
     * lost registration strikes new connections only). Its receive deadline comes after the point a
     * nudge would have been due, so a nudge, if any, is counted by the time it fails.
     */
    @Test
    void aPullOnAReusedConnectionIsNotNudged() throws Exception {
        HealthMonitor health = new HealthMonitor();
        BackgroundErrors errors = new BackgroundErrors(LoggerFactory.getLogger(PullNudgeAfterGreetingTest.class));
        try (ZContext ctx = new ZContext();
                PullChannels ch = new PullChannels(TimeUnit.SECONDS.toNanos(3), TimeUnit.SECONDS.toNanos(1), errors,
                        SideChannelLimits.DEFAULTS, health, new zmq.msg.MsgAllocatorHeap(), a -> { })) {
            ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
            router.setReceiveTimeOut(20_000);
            String address = "tcp://127.0.0.1:" + router.bindToRandomPort("tcp://127.0.0.1");
            CompletableFuture<String> first = submit(ch, address);
            byte[] identity = router.recv(0);
            assertNotNull(identity, "the first pull arrived");
            assertNotNull(router.recv(0), "its body");
            router.sendMore(identity);
            router.send(MooncakeXferResponseCodec.encode(
                    MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, List.of("r1"), null, null)), 0);
            assertEquals("FINISH", first.get(20, TimeUnit.SECONDS));
            long before = ch.pollerNudges(); // the first pull, answered, is nudged no more

            CompletableFuture<String> second = submit(ch, address);
            assertNotNull(router.recv(0), "the second pull arrived");
            assertNotNull(router.recv(0), "its body"); // and is never answered
            String outcome = second.get(20, TimeUnit.SECONDS);
            assertTrue(outcome.contains("receive timeout"), outcome);
            assertEquals(1, ch.connectionsOpened(), "the second pull went on the first one's connection");
            assertEquals(before, ch.pollerNudges(), "nudges for the pull on the reused connection");
            assertEquals(0, errors.count(), "background errors");
        }
    }
}
