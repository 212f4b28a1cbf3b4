package io.mooncake4j.connector.worker.receive;

import static io.mooncake4j.connector.worker.WorkerTestSupport.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.fuzz.ZmtpPeer;
import java.io.DataInputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * D's DEALER loop ({@link PullChannels}) against a JeroMQ ROUTER (the reference peer) and
 * against hand-written P sides: the request only after P's READY, handshake retries, connection reuse,
 * "no write after abandonment" (a lost connection fails the pull at once only when P's port refuses),
 * the response limit, the connection cap and the watchdog.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PullChannelsTest {

    private final HealthMonitor health = new HealthMonitor();
    private final BackgroundErrors errors = new BackgroundErrors(LoggerFactory.getLogger(PullChannelsTest.class));
    private final List<String> lostAddresses = new CopyOnWriteArrayList<>();
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
    }

    private PullChannels channels(long receiveMs, long handshakeMs, long maxResponseBytes, int maxConnections)
            throws Exception {
        PullChannels c = new PullChannels(TimeUnit.MILLISECONDS.toNanos(receiveMs),
                TimeUnit.MILLISECONDS.toNanos(handshakeMs), errors,
                ChannelLimits.DEFAULTS.withMaxResponseBytes(maxResponseBytes), health, lostAddresses::add,
                maxConnections);
        toClose.add(c);
        return c;
    }

    /** Collects one pull's outcome. */
    private static final class Outcome implements PullChannels.Listener {
        final List<MooncakeXferResponse> responses = new CopyOnWriteArrayList<>();
        final CompletableFuture<String> end = new CompletableFuture<>();

        @Override
        public void onResponse(MooncakeXferResponse r) {
            responses.add(r);
            if (r.status() != MooncakeXferResponseStatus.CONTINUE) {
                end.complete("answered " + r.status());
            }
        }

        @Override
        public void onFailure(String reason) {
            end.complete("failed: " + reason);
        }

        String await() throws Exception {
            return end.get(30, TimeUnit.SECONDS);
        }
    }

    private static byte[] finish(String... ok) {
        return MooncakeXferResponseCodec.encode(MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH,
                List.of(ok), List.of(), null));
    }

    private static byte[] cont(String... ok) {
        return MooncakeXferResponseCodec.encode(MooncakeXferResponse.of(MooncakeXferResponseStatus.CONTINUE,
                List.of(ok), List.of(), null));
    }

    private ServerSocket fakeP() throws Exception {
        ServerSocket s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        toClose.add(s);
        return s;
    }

    private static String address(int port) {
        return "tcp://127.0.0.1:" + port;
    }

    /** A JeroMQ ROUTER (the reference peer), closed after the test. */
    private ZMQ.Socket jeromqRouter() {
        ZContext ctx = new ZContext();
        toClose.add(ctx);
        ZMQ.Socket router = ctx.createSocket(SocketType.ROUTER);
        router.setLinger(0);
        router.setReceiveTimeOut(20_000);
        return router;
    }

    @Test
    void pullsFromAJeroMqRouterAndReusesTheConnection() throws Exception {
        ZMQ.Socket router = jeromqRouter();
        int port = router.bindToRandomPort("tcp://127.0.0.1");
        PullChannels ch = channels(30_000, 1_000, 1 << 20, 0);
        for (int i = 0; i < 3; i++) {
            Outcome o = new Outcome();
            ch.submit(address(port), ("req-" + i).getBytes(StandardCharsets.US_ASCII), o);
            byte[] identity = router.recv();
            assertTrue(identity != null && router.hasReceiveMore(), "JeroMQ ROUTER got [identity, request]");
            assertEquals("req-" + i, router.recvStr());
            router.sendMore(identity);
            router.send(cont("a" + i));
            router.sendMore(identity);
            router.send(finish("b" + i));
            assertEquals("answered FINISH", o.await());
            assertEquals(2, o.responses.size());
            assertEquals(List.of("a" + i), o.responses.get(0).okReqs());
        }
        assertEquals(3, ch.pullsStarted());
        assertEquals(1, ch.connectionsOpened(), "the idle connection is reused");
        await(() -> ch.activePulls() == 0, "no pull active");
        assertTrue(lostAddresses.isEmpty());
        assertEquals(0, errors.count());
    }

    @Test
    void theRequestGoesOutOnlyAfterPsReadyAndAStuckHandshakeIsRetriedOnAFreshConnection() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(30_000, 300, 1 << 20, 0);
        Outcome o = new Outcome();
        ch.submit(address(fake.getLocalPort()), "the-request".getBytes(StandardCharsets.US_ASCII), o);
        fake.setSoTimeout(20_000);
        try (Socket silent = fake.accept()) { // first connection: we answer nothing
            DataInputStream in = new DataInputStream(silent.getInputStream());
            byte[] greeting = new byte[64];
            in.readFully(greeting);
            assertEquals((byte) 0xFF, greeting[0]);
            assertEquals(3, greeting[10]);
            int flags = in.readUnsignedByte();
            assertEquals(ZmtpPeer.COMMAND, flags, "D's READY follows its greeting at once");
            in.readFully(new byte[in.readUnsignedByte()]);
            silent.setSoTimeout(250);
            assertThrows(SocketTimeoutException.class, in::readUnsignedByte,
                    "no request before P's READY");
            // D gives up on this connection after its handshake timeout and connects afresh
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
                byte[] req = z.readFrame();
                assertEquals("the-request", new String(req, 1, req.length - 1, StandardCharsets.US_ASCII));
                z.write(ZmtpPeer.frame(0, finish("x")));
                assertEquals("answered FINISH", o.await());
            }
        }
        assertTrue(ch.handshakeRetries() >= 1, "retries " + ch.handshakeRetries());
        assertTrue(ch.connectionsOpened() >= 2);
    }

    @Test
    void aPrefillThatFailsTheHandshakeNeverGetsTheRequestAndThePullEndsAtItsDeadline() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(3_000, 1_000, 1 << 20, 0); // D reconnects every 100 ms meanwhile
        Outcome o = new Outcome();
        ch.submit(address(fake.getLocalPort()), "the-request".getBytes(StandardCharsets.US_ASCII), o);
        fake.setSoTimeout(20_000);
        byte[] v2 = ZmtpPeer.greeting();
        v2[10] = 1; // a ZMTP 2.0 server
        int connections = 0;
        long requestBytes = 0;
        while (connections < 2) {
            try (Socket s = fake.accept()) {
                connections++;
                s.getOutputStream().write(java.util.Arrays.copyOf(v2, 11));
                DataInputStream in = new DataInputStream(s.getInputStream());
                in.readFully(new byte[64]); // D's greeting
                assertEquals(ZmtpPeer.COMMAND, in.readUnsignedByte(), "then its READY");
                in.readFully(new byte[in.readUnsignedByte()]);
                s.setSoTimeout(30_000); // bounds a failure only: the read returns at D's close
                while (in.read() >= 0) { // D closes: nothing but its greeting and READY came
                    requestBytes++;
                }
            }
        }
        assertEquals(0, requestBytes, "the request never went to a peer whose handshake failed");
        assertTrue(connections >= 2, "D connected again after the failed handshake");
        String end = o.await();
        assertTrue(end.contains("receive timeout"), end);
        assertTrue(ch.handshakeReconnects() >= 2, "reconnects " + ch.handshakeReconnects());
    }

    @Test
    void aConnectionLostAfterTheRequestFailsThePullAtOnceWhenPsPortRefuses() throws Exception {
        ServerSocket fake = fakeP();
        int port = fake.getLocalPort();
        PullChannels ch = channels(30_000, 1_000, 1 << 20, 0);
        Outcome o = new Outcome();
        long t0 = System.nanoTime();
        ch.submit(address(port), new byte[] {1}, o);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            z.readFrame();
            fake.close(); // nothing listens any more: P is gone
        }
        String end = o.await();
        assertTrue(end.contains("no longer accepts connections"), end);
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 25_000, "well before the 30 s deadline");
        assertTrue(lostAddresses.contains(address(port)));
        await(() -> ch.activePulls() == 0, "the pull ended");
    }

    /** A frame's body as text ({@link ZmtpPeer#readFrame} puts the flags first). */
    private static String body(byte[] frame) {
        return new String(frame, 1, frame.length - 1, StandardCharsets.US_ASCII);
    }

    @Test
    void aConnectionLostAfterTheRequestSendsItAgainAndAnswersHeardAlreadyArePassedOnOnce() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(60_000, 1_000, 1 << 20, 0);
        Outcome o = new Outcome();
        byte[] request = "the-pull".getBytes(StandardCharsets.US_ASCII);
        ch.submit(address(fake.getLocalPort()), request, o);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            assertEquals("the-pull", body(z.readFrame()));
            z.write(ZmtpPeer.frame(0, cont("a")));
            await(() -> o.responses.size() == 1, "a's answer read");
        } // lost before b's answer
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            assertEquals("the-pull", body(z.readFrame()), "the same request again");
            z.write(ZmtpPeer.frame(0, finish("a", "b"))); // P answers again what it answered before
            assertEquals("answered FINISH", o.await());
        }
        assertEquals(2, o.responses.size());
        assertEquals(List.of("a"), o.responses.get(0).okReqs());
        assertEquals(List.of("b"), o.responses.get(1).okReqs(), "a is passed on once");
        assertEquals(1, ch.pullsResent());
        assertTrue(lostAddresses.contains(address(fake.getLocalPort())));
        await(() -> ch.activePulls() == 0, "the pull ended");
    }

    @Test
    void aPullIsSentAgainAtMostTwiceThenWaitsForItsDeadline() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(60_000, 1_000, 1 << 20, 0);
        Outcome o = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {7}, o);
        for (int i = 0; i <= PullChannels.MAX_RESENDS; i++) {
            try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
                assertEquals(7, z.readFrame()[1], "the request (after the flags byte)");
            } // each connection lost after the request
        }
        await(() -> lostAddresses.size() >= PullChannels.MAX_RESENDS + 1, "every loss reported");
        assertEquals(PullChannels.MAX_RESENDS, ch.pullsResent());
        assertFalse(o.end.isDone(), "past the re-sends the pull waits for its deadline (P's port accepts)");
        fake.close(); // now P is gone: the probe is refused
        assertTrue(o.await().contains("no longer accepts connections"));
    }

    @Test
    void aConnectionLostAfterTheRequestWaitsForTheReceiveDeadlineWhilePsPortAccepts() throws Exception {
        ServerSocket fake = fakeP(); // stays open: the probe's connect is accepted by the kernel
        PullChannels ch = channels(1_500, 1_000, 1 << 20, 0);
        Outcome o = new Outcome();
        long t0 = System.nanoTime();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, o);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            z.readFrame();
        } // closed: the answer is lost
        String end = o.await();
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(end.contains("receive timeout"), end);
        assertTrue(ms >= 1_500, "failed only at the receive deadline: " + ms + " ms");
        assertTrue(lostAddresses.contains(address(fake.getLocalPort())));
    }

    @Test
    void aResponseFrameAboveTheLimitDropsTheConnectionBeforeAllocating() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(30_000, 1_000, 1024, 0);
        Outcome o = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, o);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            z.readFrame();
            fake.close();
            z.write(ZmtpPeer.longHeader(0, 1L << 40));
            assertTrue(z.closedByPeer(), "D drops a P that declares a 1 TiB frame");
        }
        String end = o.await();
        assertTrue(end.contains("exceeds the limit of 1024 bytes") && end.contains("no longer accepts"), end);
        assertTrue(health.snapshot().healthy());
    }

    @Test
    void aMultiFrameOrUndecodableAnswerFailsThePull() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(30_000, 1_000, 1 << 20, 0);
        Outcome two = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, two);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            z.readFrame();
            z.write(ZmtpPeer.frame(ZmtpPeer.MORE, finish("a")));
            z.write(ZmtpPeer.frame(0, finish("b")));
            String end = two.await();
            assertTrue(end.contains("a message of 2 frames, expected 1"), end);
        }
        Outcome junk = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, junk);
        try (ZmtpPeer z = ZmtpPeer.acceptHandshaken(fake, "ROUTER", Duration.ofSeconds(20))) {
            z.readFrame();
            z.write(ZmtpPeer.frame(0, new byte[] {(byte) 0xC1}));
            assertTrue(junk.await().startsWith("failed: "), junk.end.join());
        }
    }

    @Test
    void connectionsAreCappedAndAPullOverTheCapFailsLoudly() throws Exception {
        ServerSocket fake = fakeP(); // accepts (kernel backlog) and never answers
        PullChannels ch = channels(30_000, 20_000, 1 << 20, 2);
        Outcome a = new Outcome();
        Outcome b = new Outcome();
        Outcome c = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, a);
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, b);
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, c);
        String end = c.await();
        assertTrue(end.contains("too many side-channel connections (at most 2)"), end);
        assertFalse(a.end.isDone() || b.end.isDone(), "the two in the cap still wait");
        assertFalse(health.snapshot().healthy(), "the exhaustion is reported");
        assertTrue(health.snapshot().problems().getFirst().contains("no free connection slot"));
    }

    @Test
    void anErrorEscapingTheLoopFailsThePullsInFlightAndTheLoopGoesOn() throws Exception {
        ServerSocket fake = fakeP();
        PullChannels ch = channels(30_000, 20_000, 1 << 20, 0);
        Outcome stuck = new Outcome();
        ch.submit(address(fake.getLocalPort()), new byte[] {1}, stuck);
        await(() -> ch.activePulls() == 1, "in flight");
        ch.injectFault(new OutOfMemoryError("injected into the DEALER loop"));
        String end = stuck.await();
        assertTrue(end.contains("the Mooncake pull I/O thread failed"), end);
        await(() -> health.snapshot().loopRecoveries() == 1, "recovered");
        assertEquals(1, health.snapshot().loopDeaths());
        assertTrue(ch.alive());
        fake.close();
        ZMQ.Socket router = jeromqRouter();
        int port = router.bindToRandomPort("tcp://127.0.0.1");
        Outcome later = new Outcome();
        ch.submit(address(port), new byte[] {2}, later);
        byte[] id = router.recv();
        router.recv();
        router.sendMore(id);
        router.send(finish());
        assertEquals("answered FINISH", later.await());
    }

    @Test
    void afterCloseASubmittedPullFailsAtOnce() throws Exception {
        PullChannels ch = channels(30_000, 1_000, 1 << 20, 0);
        ch.close();
        assertFalse(ch.alive());
        Outcome o = new Outcome();
        ch.submit(address(1), new byte[] {1}, o);
        assertEquals("failed: the Mooncake receiver is closed", o.end.getNow("not yet"));
    }
}
