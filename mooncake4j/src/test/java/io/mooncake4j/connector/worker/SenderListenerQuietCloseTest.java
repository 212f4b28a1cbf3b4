package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertFalse;

import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.send.SenderListener;
import io.mooncake4j.testlog.LogCapture;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * An orderly close of P's listener (a node stopped by SIGTERM closes its workers) logs nothing at WARN or
 * above.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SenderListenerQuietCloseTest {

    private static final byte[] PING = "ping".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    private static SenderListener echoListener() throws Exception {
        return new SenderListener("127.0.0.1", () -> (identity, frames, reply) -> reply.send(frames.getFirst()),
                SideChannelLimits.DEFAULTS.channel(), new HealthMonitor(), () -> null, SenderListener.POLL_MS);
    }

    @Test
    void closingWithConnectedPeersLogsNoWarningOrError() throws Exception {
        try (LogCapture logs = LogCapture.start(SenderListener.class)) {
            for (int i = 0; i < 25; i++) {
                SenderListener l = echoListener();
                int port = l.ready().get(20, TimeUnit.SECONDS);
                try (PdTestbed.RawDealer a = new PdTestbed.RawDealer(port, l::handshakes);
                        PdTestbed.RawDealer b = new PdTestbed.RawDealer(port, l::handshakes)) {
                    a.send(PING);
                    b.send(PING);
                    a.send(PING); // left unanswered or answered: either way, no error at close
                    awaitReplies(l, 2);
                    l.close(); // the peers are still connected
                }
                assertFalse(l.alive());
            }
            logs.assertNone(Level.WARN);
        }
    }

    private static void awaitReplies(SenderListener l, long n) {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (l.stats().repliesSent() < n) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("fewer than " + n + " replies within 20 s: " + l.stats());
            }
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

}
