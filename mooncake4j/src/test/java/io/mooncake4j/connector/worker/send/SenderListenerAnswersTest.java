package io.mooncake4j.connector.worker.send;

import static io.mooncake4j.connector.worker.WorkerTestSupport.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.worker.loop.ChannelLimits;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.fuzz.ZmtpPeer;
import io.mooncake4j.internal.zmtp.Zmtp;
import io.mooncake4j.testlog.LogCapture;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * Every message that arrives whole gets its final answer, or the listener counts why not: its peer broke
 * the protocol, its peer is gone, its peer's out-queue was full (the peer stopped reading), or the listener
 * was stopping. Under a mixed load the counters add up to the difference between the messages received and
 * the final answers sent, and a peer that reconnects with its identity gets the answers of the messages it
 * sent before.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SenderListenerAnswersTest {

    /** Bounds a read that waits for a frame or a close when it never comes: never the test's pace. */
    private static final Duration READ = Duration.ofSeconds(30);
    private static final int BIG = 64 * 1024;
    private static final int NON_READER_MESSAGES = 1_500;

    private record Held(String body, ReplySink sink) {}

    private final ConcurrentLinkedQueue<Held> held = new ConcurrentLinkedQueue<>();
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
    }

    /** "big" is answered at once with 64 KiB; everything else is held until the test answers it. */
    private SideChannelHandler handler() {
        return (identity, frames, reply) -> {
            String body = new String(frames.getFirst(), StandardCharsets.US_ASCII);
            if (body.equals("big")) {
                reply.send(new byte[BIG]);
            } else {
                held.add(new Held(body, reply));
            }
        };
    }

    private ZmtpPeer raw(int port) throws Exception {
        ZmtpPeer z = ZmtpPeer.connect(port, READ);
        toClose.add(z);
        return z;
    }

    private static void handshake(ZmtpPeer z, byte[] id) throws Exception {
        z.write(ZmtpPeer.greeting());
        z.readGreeting();
        ByteBuffer b = Zmtp.commandFrame(Zmtp.readyBody("DEALER", id));
        byte[] ready = new byte[b.remaining()];
        b.get(ready);
        z.write(ready);
        z.readFrame(); // P's READY
    }

    private static void send(ZmtpPeer z, String body, int times) throws Exception {
        byte[] f = ZmtpPeer.frame(0, body.getBytes(StandardCharsets.US_ASCII));
        for (int i = 0; i < times; i++) {
            z.write(f);
        }
    }

    /** The body of a frame as {@link ZmtpPeer#readFrame()} returns it (flags byte, then the body). */
    private static String body(byte[] frame) {
        return new String(frame, 1, frame.length - 1, StandardCharsets.US_ASCII);
    }

    @Test
    void finalAnswersAreSentOrCountedByReasonAndAddUpToTheMessagesReceived() throws Exception {
        LogCapture logs = LogCapture.start(SenderListener.class);
        toClose.add(logs);
        SideChannelHandler h = handler();
        SenderListener l = new SenderListener("127.0.0.1", () -> h, ChannelLimits.DEFAULTS.withMaxMetadataBytes(1024),
                new HealthMonitor(), () -> null, 100);
        toClose.add(l);
        int port = l.ready().get(30, TimeUnit.SECONDS);

        ZmtpPeer good = raw(port); // reads every answer
        handshake(good, new byte[0]);
        send(good, "good", 5);
        await(() -> held.size() == 5, "the good peer's messages reached the handler");

        ZmtpPeer gone = raw(port); // leaves before its answers
        handshake(gone, new byte[0]);
        send(gone, "gone", 3);
        await(() -> held.size() == 8, "the leaving peer's messages reached the handler");
        gone.close();
        await(() -> l.connections() == 1, "the listener saw the peer leave");

        ZmtpPeer rogue = raw(port); // breaks the protocol after its messages
        handshake(rogue, new byte[0]);
        send(rogue, "rogue", 2);
        await(() -> held.size() == 10, "the rogue peer's messages reached the handler");
        rogue.write(ZmtpPeer.longHeader(0, 1L << 40));
        assertTrue(rogue.closedByPeer(), "a 1 TiB frame header ends the connection");
        await(() -> l.connections() == 1 && l.stats().peersDropped() == 1, "the rogue peer dropped");
        logs.assertLogged(Level.WARN, "dropped");

        byte[] id = "d-reconnects".getBytes(StandardCharsets.US_ASCII);
        ZmtpPeer first = raw(port); // sends, reconnects with its identity, reads the answer there
        handshake(first, id);
        await(() -> l.handshakes() == 4, "the first connection's identity accepted");
        send(first, "again", 1);
        await(() -> held.size() == 11, "the reconnecting peer's message reached the handler");
        first.close();
        await(() -> l.connections() == 1, "the listener saw the first connection close");
        ZmtpPeer second = raw(port);
        handshake(second, id);
        await(() -> l.handshakes() == 5, "the identity taken over by the new connection");

        ZmtpPeer deaf = raw(port); // never reads: its out-queue fills
        handshake(deaf, new byte[0]);
        send(deaf, "big", NON_READER_MESSAGES);
        await(() -> answers(l).sent() + answers(l).dropped() == NON_READER_MESSAGES, "every big answer handled");

        for (Held m : held) {
            m.sink().send(("answer:" + m.body()).getBytes(StandardCharsets.US_ASCII));
        }
        for (int i = 0; i < 5; i++) {
            assertEquals("answer:good", body(good.readFrame()));
        }
        assertEquals("answer:again", body(second.readFrame()), "the answer reaches the reconnected peer");
        long total = 5 + 3 + 2 + 1 + NON_READER_MESSAGES;
        await(() -> answers(l).sent() + answers(l).dropped() == total, "every final answer sent or dropped");

        ListenerStats s = l.stats();
        ListenerStats.Answers a = s.answers();
        assertEquals(total, s.messagesReceived());
        assertEquals(0, s.handlerErrors());
        assertEquals(3, a.droppedPeerGone(), "the peer that left");
        assertEquals(2, a.droppedProtocol(), "the peer that broke the protocol");
        assertTrue(a.droppedQueueFull() > 0, "the peer that stopped reading: " + a);
        assertEquals(0, a.droppedClosing());
        assertEquals(5 + 1 + NON_READER_MESSAGES - a.droppedQueueFull(), a.sent(), a.toString());
        assertEquals(s.messagesReceived() - a.sent(), a.dropped(), "the drops add up: " + a);
    }

    private static ListenerStats.Answers answers(SenderListener l) {
        return l.stats().answers();
    }

    @Test
    void anAnswerAfterTheListenerStoppedIsCountedAsClosing() throws Exception {
        SideChannelHandler h = handler();
        SenderListener l = new SenderListener("127.0.0.1", () -> h, ChannelLimits.DEFAULTS, new HealthMonitor(),
                () -> null, 100);
        int port = l.ready().get(30, TimeUnit.SECONDS);
        try {
            ZmtpPeer z = raw(port);
            handshake(z, new byte[0]);
            send(z, "late", 1);
            await(() -> held.size() == 1, "the message reached the handler");
        } finally {
            l.close();
        }
        assertFalse(held.peek().sink().send("answer".getBytes(StandardCharsets.US_ASCII)));
        ListenerStats s = l.stats();
        assertEquals(1, s.messagesReceived());
        assertEquals(new ListenerStats.Answers(0, 0, 0, 0, 1), s.answers());
        assertEquals(s.messagesReceived() - s.answers().sent(), s.answers().dropped());
    }
}
