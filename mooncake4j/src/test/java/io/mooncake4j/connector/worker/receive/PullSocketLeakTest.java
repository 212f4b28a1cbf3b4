package io.mooncake4j.connector.worker.receive;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.loop.BackgroundErrors;
import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * multihost.sh regression: after the P worker a D pulled from died with pulls in flight, every later
 * pull to another P failed for want of a socket slot (JeroMQ's EMFILE, when D ran on JeroMQ). With D's
 * connections capped at a few dozen, many more pulls than that must succeed after the death: no
 * connection of a dead or refused pull keeps its slot. The P side is a JeroMQ ROUTER (an independent peer).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PullSocketLeakTest {

    private static final int MAX_SOCKETS = 128; // D's connection cap here

    /** A ROUTER that answers FINISH to every request while {@code answering}. */
    private static final class FakeP implements AutoCloseable {
        final ZMQ.Context ctx = ZMQ.context(1);
        final ZMQ.Socket router = ctx.socket(SocketType.ROUTER);
        final String address;
        final AtomicBoolean answering = new AtomicBoolean(true);
        final AtomicBoolean running = new AtomicBoolean(true);
        final Thread thread;

        FakeP() {
            router.setLinger(0);
            int port = router.bindToRandomPort("tcp://127.0.0.1");
            address = "tcp://127.0.0.1:" + port;
            router.setReceiveTimeOut(20);
            thread = new Thread(this::serve, "fake-p");
            thread.setDaemon(true);
            thread.start();
        }

        private void serve() {
            byte[] finish = MooncakeXferResponseCodec.encode(
                    MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, List.of("r"), null, null));
            while (running.get()) {
                ZMsg m = ZMsg.recvMsg(router, true);
                if (m == null || !answering.get()) {
                    continue;
                }
                ZMsg reply = new ZMsg();
                reply.add(m.pop());
                reply.add(finish);
                reply.send(router);
            }
            router.close();
        }

        @Override
        public void close() throws InterruptedException {
            running.set(false);
            thread.join(5_000);
            ctx.close();
        }
    }

    private static CompletableFuture<String> pull(PullChannels ch, String address) {
        CompletableFuture<String> f = new CompletableFuture<>();
        ch.submit(address, new byte[] {1}, new PullChannels.Listener() {
            @Override
            public void onResponse(MooncakeXferResponse response) {
                if (response.status() != MooncakeXferResponseStatus.CONTINUE) {
                    f.complete("ok");
                }
            }

            @Override
            public void onFailure(String reason) {
                f.complete(reason);
            }
        });
        return f;
    }

    @Test
    void pullsToASurvivingPrefillGoOnAfterAnotherDiedWithPullsInFlight() throws Exception {
        HealthMonitor health = new HealthMonitor();
        BackgroundErrors errors = new BackgroundErrors(LoggerFactory.getLogger(PullSocketLeakTest.class));
        try (PullChannels ch = new PullChannels(TimeUnit.SECONDS.toNanos(10), TimeUnit.SECONDS.toNanos(1), errors,
                ChannelLimits.DEFAULTS, health, a -> { }, MAX_SOCKETS);
                FakeP survivor = new FakeP()) {
            FakeP doomed = new FakeP();
            // both Ps serve; the idle pools fill
            for (int round = 0; round < 4; round++) {
                List<CompletableFuture<String>> fs = new java.util.ArrayList<>();
                for (int i = 0; i < 6; i++) {
                    fs.add(pull(ch, doomed.address));
                    fs.add(pull(ch, survivor.address));
                }
                for (CompletableFuture<String> f : fs) {
                    assertEquals("ok", f.get(20, TimeUnit.SECONDS));
                }
            }
            // the doomed P stops answering, pulls go in flight, then it dies
            doomed.answering.set(false);
            List<CompletableFuture<String>> inFlight = new java.util.ArrayList<>();
            for (int i = 0; i < 10; i++) {
                inFlight.add(pull(ch, doomed.address));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (ch.activePulls() < 10 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertTrue(ch.activePulls() >= 10, "pulls in flight to the P about to die: " + ch.activePulls());
            doomed.close();
            // many more pulls than the context has socket slots, to the survivor
            for (int i = 0; i < 6 * MAX_SOCKETS; i++) {
                assertEquals("ok", pull(ch, survivor.address).get(20, TimeUnit.SECONDS), "pull " + i);
                if (i % 7 == 0) {
                    // and some concurrently, so the pool opens fresh connections too
                    List<CompletableFuture<String>> fs = new java.util.ArrayList<>();
                    for (int k = 0; k < 10; k++) {
                        fs.add(pull(ch, survivor.address));
                    }
                    for (CompletableFuture<String> f : fs) {
                        assertEquals("ok", f.get(20, TimeUnit.SECONDS), "concurrent pull after " + i);
                    }
                }
            }
            // the pulls caught by the death end too (at once when the reconnect is refused, else at their deadline)
            for (CompletableFuture<String> f : inFlight) {
                String r = f.get(30, TimeUnit.SECONDS);
                assertTrue(!r.equals("ok"), r);
            }
        }
    }

    /**
     * Pulls to a port where nothing listens keep reconnecting until their deadline while pulls to a live
     * P go on: the refused connections must give their slots back (else the later pulls find none).
     */
    @Test
    void pullsReconnectingToADeadPortLeaveTheirSlotsFree() throws Exception {
        HealthMonitor health = new HealthMonitor();
        BackgroundErrors errors = new BackgroundErrors(LoggerFactory.getLogger(PullSocketLeakTest.class));
        String dead;
        try (ZMQ.Context c = ZMQ.context(1); ZMQ.Socket s = c.socket(SocketType.ROUTER)) {
            dead = "tcp://127.0.0.1:" + s.bindToRandomPort("tcp://127.0.0.1");
        }
        try (PullChannels ch = new PullChannels(TimeUnit.SECONDS.toNanos(4), TimeUnit.MILLISECONDS.toNanos(40), errors,
                ChannelLimits.DEFAULTS, health, a -> { }, MAX_SOCKETS);
                FakeP survivor = new FakeP()) {
            List<CompletableFuture<String>> doomed = new java.util.ArrayList<>();
            for (int i = 0; i < 16; i++) {
                doomed.add(pull(ch, dead));
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            int n = 0;
            while (System.nanoTime() < end) {
                assertEquals("ok", pull(ch, survivor.address).get(20, TimeUnit.SECONDS), "pull " + n++);
            }
            for (CompletableFuture<String> f : doomed) {
                String r = f.get(30, TimeUnit.SECONDS);
                assertTrue(!r.equals("ok"), r);
            }
            for (int i = 0; i < 3 * MAX_SOCKETS; i++) {
                assertEquals("ok", pull(ch, survivor.address).get(20, TimeUnit.SECONDS), "pull after " + i);
            }
            // the refused pulls reconnected (every 100 ms until their deadline) more often than the cap has
            // slots: only their freed slots let the survivor's pulls above through
            assertTrue(ch.connectionsOpened() > MAX_SOCKETS, "connections opened: " + ch.connectionsOpened());
        }
    }
}
