package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.handshake.HandshakeFrame;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The shared engine-level pieces: one fetch per name in flight, segment names, the handshake service. */
@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SegmentOpeningsTest {

    @Test
    void concurrentOpensOfOneNameShareOneFetch() throws Exception {
        SegmentOpenings openings = new SegmentOpenings(10_000);
        AtomicInteger fetches = new AtomicInteger();
        CountDownLatch inFetch = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        long[] results = new long[2];
        Thread first = Thread.ofPlatform().start(() -> results[0] = openings.open("h:1", n -> {
            fetches.incrementAndGet();
            inFetch.countDown();
            await(release);
            return 7;
        }));
        assertTrue(inFetch.await(10, TimeUnit.SECONDS));
        Thread second = Thread.ofPlatform().start(() -> results[1] = openings.open("h:1", n -> {
            fetches.incrementAndGet();
            return 8;
        }));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (second.getState() != Thread.State.TIMED_WAITING && System.nanoTime() < deadline) {
            Thread.onSpinWait(); // until the second caller waits for the first one's fetch
        }
        assertEquals(Thread.State.TIMED_WAITING, second.getState());
        assertEquals(1, openings.inFlight());
        release.countDown();
        first.join(10_000);
        second.join(10_000);
        assertEquals(7L, results[0]);
        assertEquals(7L, results[1]);
        assertEquals(1, fetches.get());
        assertEquals(0, openings.inFlight());
    }

    private static void await(CountDownLatch l) {
        try {
            l.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void aFailedFetchIsNotRememberedAndAnExceptionReachesItsCaller() {
        SegmentOpenings openings = new SegmentOpenings(1_000);
        assertEquals(-1, openings.open("h:1", n -> -1));
        assertEquals(3, openings.open("h:1", n -> 3));
        assertThrows(IllegalStateException.class, () -> openings.open("h:2", n -> {
            throw new IllegalStateException("boom");
        }));
        assertEquals(0, openings.inFlight());
    }

    @Test
    void segmentNamesLoseLeadingSlashes() {
        assertEquals("h:1", EngineCalls.normalizedSegmentName("//h:1"));
        assertEquals("h:1", EngineCalls.normalizedSegmentName("h:1"));
        assertEquals(null, EngineCalls.normalizedSegmentName("///"));
        assertEquals(null, EngineCalls.normalizedSegmentName(""));
        assertEquals(null, EngineCalls.normalizedSegmentName(null));
    }

    @Test
    void handshakeServiceAnswersAndQueuesNotifies() {
        HandshakeService s = new HandshakeService(() -> "{\"d\":1}\n", req -> "conn\n");
        assertEquals("{\"d\":1}\n", s.handle(HandshakeFrame.METADATA, Map.of()));
        assertEquals("conn\n", s.handle(HandshakeFrame.CONNECTION, Map.of()));
        assertEquals(HandshakeService.PROBE_REPLY, s.handle(HandshakeFrame.PROBE, Map.of()));
        assertEquals(HandshakeService.NOTIFY_REPLY,
                s.handle(HandshakeFrame.NOTIFY, Map.of("name", "n", "notify_msg", "m")));
        assertEquals(List.of("n=m"), s.drainNotifies((a, b) -> a + "=" + b));
        assertEquals(List.of(), s.drainNotifies((a, b) -> a + "=" + b));
        assertThrows(IllegalArgumentException.class, () -> s.handle(HandshakeFrame.NOTIFY, "x"));
        assertThrows(IllegalArgumentException.class, () -> s.handle(99, Map.of()));
    }
}
