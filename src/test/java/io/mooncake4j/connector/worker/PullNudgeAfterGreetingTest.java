package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.fuzz.ZmtpPeer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;

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
}
