package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZMQ;

/** What the side-channel loops wait on instead of {@code ZMQ.Poller} (issue 13). */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class SocketWaiterTest {

    private final ZMQ.Context context = ZMQ.context(1);

    @AfterEach
    void closeContext() {
        context.close();
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Waits (bounded by the class timeout) until {@code socket} has a message, through the waiter alone. */
    private static byte[] awaitMessage(SocketWaiter waiter, ZMQ.Socket socket) throws Exception {
        byte[] msg;
        while ((msg = socket.recv(ZMQ.DONTWAIT)) == null) {
            waiter.await(10_000);
        }
        return msg;
    }

    @Test
    void aMessageOnAWatchedSocketEndsTheWait() throws Exception {
        try (ZMQ.Socket a = context.socket(SocketType.PAIR); ZMQ.Socket b = context.socket(SocketType.PAIR);
                SocketWaiter waiter = new SocketWaiter()) {
            a.bind("inproc://waiter-message");
            b.connect("inproc://waiter-message");
            waiter.register(a);
            waiter.register(a); // twice: watched once
            Thread sender = Thread.ofPlatform().start(() -> b.send(bytes("hello"), 0));
            assertArrayEquals(bytes("hello"), awaitMessage(waiter, a));
            sender.join();
            // one message, read: nothing more is pending and a bounded wait just ends
            waiter.await(20);
            assertNull(a.recv(ZMQ.DONTWAIT));
        }
    }

    @Test
    void aMailboxSignalWithoutAMessageIsConsumedNotSpunOn() throws Exception {
        try (ZMQ.Socket a = context.socket(SocketType.PAIR); ZMQ.Socket b = context.socket(SocketType.PAIR);
                SocketWaiter waiter = new SocketWaiter()) {
            a.bind("inproc://waiter-command");
            waiter.register(a);
            // the connect sends the bound socket a command (its new pipe) and no message: its mailbox
            // becomes readable once; the waiter must take that signal (ZMQ_EVENTS) and wait on
            b.connect("inproc://waiter-command");
            waiter.await(200);
            long empty = waiter.emptyWakeUps();
            assertTrue(empty >= 1 && empty <= 5, "passes on a signal without a message: " + empty);
            waiter.await(100); // the signal was taken: this wait blocks, it does not spin
            assertTrue(waiter.emptyWakeUps() - empty <= 2, "passes after the signal was taken: "
                    + (waiter.emptyWakeUps() - empty));
            assertNull(a.recv(ZMQ.DONTWAIT));
            b.send(bytes("after"), 0);
            assertArrayEquals(bytes("after"), awaitMessage(waiter, a));
        }
    }

    @Test
    void aWatchedPipeEndsTheWaitAndAnUnregisteredSocketDoesNot() throws Exception {
        Pipe pipe = Pipe.open();
        try (ZMQ.Socket a = context.socket(SocketType.PAIR); ZMQ.Socket b = context.socket(SocketType.PAIR);
                SocketWaiter waiter = new SocketWaiter()) {
            pipe.source().configureBlocking(false);
            a.bind("inproc://waiter-unregistered");
            b.connect("inproc://waiter-unregistered");
            waiter.register(pipe.source());
            waiter.register(a);
            waiter.unregister(a);
            b.send(bytes("unseen"), 0);
            Thread waker = Thread.ofPlatform().start(() -> {
                try {
                    pipe.sink().write(ByteBuffer.wrap(new byte[] {1}));
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            ByteBuffer buf = ByteBuffer.allocate(8);
            while (pipe.source().read(buf) == 0) {
                waiter.await(10_000);
            }
            waker.join();
            assertEquals(1, buf.position());
            assertEquals(0, waiter.emptyWakeUps(), "the unregistered socket's message woke the waiter");
            assertArrayEquals(bytes("unseen"), a.recv(0)); // it was there all along
        } finally {
            pipe.sink().close();
            pipe.source().close();
        }
    }
}
