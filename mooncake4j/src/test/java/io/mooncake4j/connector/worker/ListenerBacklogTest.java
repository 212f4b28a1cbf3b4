package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.WorkerTestSupport.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.send.SenderListener;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Bounded resources: messages P's listener has read but the sender loop has not handled yet
 * are bounded in bytes; past the budget the listener stops reading (ZMQ's high-water marks, or with the builtin
 * ROUTER TCP itself, push back on the peer) and resumes once the loop catches up, losing nothing.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ListenerBacklogTest {

    @Test
    void aStalledSenderLoopMakesTheListenerStopReadingAtItsByteBudgetAndLosesNothing() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger handled = new AtomicInteger();
        int messages = 1500;
        int size = 1000; // 1.5 MB in all; budget max(4 x 1 KiB, 1 MiB) = 1 MiB
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null,
                    b -> b.sideChannelLimits(SideChannelLimits.DEFAULTS.withMaxMetadataBytes(1024))
                            .sideChannelHandler((identity, frames, reply) -> {
                                release.await(30, TimeUnit.SECONDS); // the sender loop is stalled
                                handled.incrementAndGet();
                            }));
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                for (int i = 0; i < messages; i++) {
                    dealer.send(new byte[size]);
                }
                // not bed.awaitAll: it polls P's getFinished, which waits for the stalled sender loop (up to its
                // 30 s loop-call timeout, reported as a background error) and made this test take 30 s
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (p.worker.listenerStats().backlogPauses() == 0) {
                    assertTrue(System.nanoTime() - deadline < 0, "the listener did not pause within 20 s");
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(2));
                }
                long read = p.worker.listenerStats().messagesReceived();
                assertTrue(read < messages, "stopped reading at the budget: read " + read);
                assertTrue(read * (size + 5) <= (1 << 20) + 2L * (size + 5), "read " + read + " messages");
                release.countDown();
                bed.awaitAll(() -> handled.get() == messages, Duration.ofSeconds(30), "every message handled");
                assertEquals(messages, p.worker.listenerStats().messagesReceived());
                assertEquals(0, p.worker.backgroundErrorCount(), "no loop call timed out");
            }
        } finally {
            release.countDown();
        }
    }

    /**
     * Once the sender loop catches up, the handler task that brings the backlog back under the budget wakes
     * the listener: it does not wait for its poll bound (set to 10 minutes here, far beyond the deadlines).
     */
    @Test
    void theListenerIsWokenWhenItsBacklogDrainsNotLeftToItsPollBound() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger handled = new AtomicInteger();
        int messages = 1500;
        int size = 1000; // 1.5 MB in all; budget max(4 x 1 KiB, 1 MiB) = 1 MiB
        try (SenderListener l = new SenderListener("127.0.0.1", () -> (identity, frames, reply) -> {
                    release.await(30, TimeUnit.SECONDS); // the sender loop is stalled
                    handled.incrementAndGet();
                }, SideChannelLimits.DEFAULTS.withMaxMetadataBytes(1024).channel(), new HealthMonitor(), () -> null,
                TimeUnit.MINUTES.toMillis(10))) {
            int port = l.ready().get(20, TimeUnit.SECONDS);
            try (PdTestbed.RawDealer dealer = new PdTestbed.RawDealer(port, l::handshakes)) {
                for (int i = 0; i < messages; i++) {
                    dealer.send(new byte[size]);
                }
                await(() -> l.stats().backlogPauses() > 0, "the listener paused at its budget");
                assertTrue(l.stats().messagesReceived() < messages, "read " + l.stats().messagesReceived());
                assertEquals(0, l.backlogWakeUps(), "no handler finished before the release");
                release.countDown();
                await(() -> handled.get() == messages, "every message read and handled");
                // the handler that crossed back under the budget counted its wake-up before the later tasks ran
                assertTrue(l.backlogWakeUps() >= 1, "woken by the drain: " + l.backlogWakeUps());
                assertEquals(messages, l.stats().messagesReceived());
                assertEquals(0, l.stats().listenerErrors());
            }
        } finally {
            release.countDown();
        }
    }

    /**
     * The lost wake-up once seen under load, forced: the first handler lowers the backlog far under the budget
     * and is held (the hook) before it looks at the pause flag, while the listener reads on and pauses; it then
     * finds the flag armed by that pause, takes it and wakes the listener while the backlog is still over the
     * budget. The listener must arm the flag again, or the handler that really drains the backlog wakes no one
     * and the listener sleeps until its poll bound (10 minutes here).
     */
    @Test
    void aDrainSignalDecidedBeforeTheListenerPausedDoesNotUseUpTheWakeUpOfTheRealDrain() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger handled = new AtomicInteger();
        int messages = 1500;
        int size = 1000; // 1.5 MB in all; budget max(4 x 1 KiB, 1 MiB) = 1 MiB
        try (SenderListener l = new SenderListener("127.0.0.1", () -> (identity, frames, reply) -> {
                    if (handled.incrementAndGet() > 1) {
                        release.await(30, TimeUnit.SECONDS); // the sender loop is stalled after the first
                    }
                }, SideChannelLimits.DEFAULTS.withMaxMetadataBytes(1024).channel(), new HealthMonitor(), () -> null,
                TimeUnit.MINUTES.toMillis(10))) {
            AtomicBoolean first = new AtomicBoolean(true);
            AtomicBoolean firstLowered = new AtomicBoolean();
            l.backlogLoweredHook(now -> {
                if (first.compareAndSet(true, false)) {
                    firstLowered.set(true);
                    // the first handler's backlog is under the budget; it signals only once the listener paused
                    await(() -> l.stats().backlogPauses() > 0, "the listener paused at its budget");
                }
            });
            int port = l.ready().get(20, TimeUnit.SECONDS);
            try (PdTestbed.RawDealer dealer = new PdTestbed.RawDealer(port, l::handshakes)) {
                // the first message alone, until its handler has lowered the backlog: else, on a busy machine, the
                // listener may read past its budget and pause before that handler's decrement, which then really
                // drains the backlog under the budget (a legitimate wake-up, and a second pause)
                dealer.send(new byte[size]);
                await(firstLowered::get, "the first handler lowered the backlog");
                for (int i = 1; i < messages; i++) {
                    dealer.send(new byte[size]);
                }
                await(() -> l.backlogWakeUps() == 1, "the first handler's signal taken");
                assertEquals(1, l.stats().backlogPauses());
                assertTrue(l.stats().messagesReceived() < messages, "read " + l.stats().messagesReceived());
                release.countDown();
                await(() -> handled.get() == messages, "every message read and handled");
                assertEquals(messages, l.stats().messagesReceived());
                assertEquals(0, l.stats().listenerErrors());
            }
        } finally {
            release.countDown();
        }
    }
}
