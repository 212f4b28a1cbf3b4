package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.reflect.Field;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Plain JeroMQ 0.6.0, no mooncake4j code: the stuck handshake that {@link PullChannels} heals.
 *
 * <p>Sequential DEALER connections to a ROUTER that echoes. A connection whose reply is late is
 * inspected through JeroMQ's internals: a handle of the I/O thread's poller that is not
 * cancelled but has no valid selection key attached to it is a lost registration (the root
 * cause, see {@link PullChannels}). Then the I/O thread is nudged as {@link PullChannels} does,
 * and the reply must arrive.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JeroMqLostRegistrationTest {

    private static final Logger LOG = LoggerFactory.getLogger(JeroMqLostRegistrationTest.class);
    private static final int CONNECTIONS = 200;

    private static Object field(Object o, Class<?> c, String name) throws ReflectiveOperationException {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    /** Handles of {@code socket}'s I/O threads whose selector registration is lost. */
    static List<String> lostRegistrations(ZMQ.Socket socket) throws ReflectiveOperationException {
        List<String> lost = new ArrayList<>();
        for (Object io : (List<?>) field(socket.base().getCtx(), zmq.Ctx.class, "ioThreads")) {
            Object poller = field(io, zmq.io.IOThread.class, "poller");
            Selector selector = (Selector) field(poller, zmq.poll.Poller.class, "selector");
            // read on the test thread while the I/O thread may change it: retry a torn read
            for (int attempt = 0; ; attempt++) {
                try {
                    for (Object h : List.copyOf((Set<?>) field(poller, zmq.poll.Poller.class, "fdTable"))) {
                        SelectableChannel fd = (SelectableChannel) field(h, zmq.poll.Poller.Handle.class, "fd");
                        boolean cancelled = (boolean) field(h, zmq.poll.Poller.Handle.class, "cancelled");
                        SelectionKey key = fd.keyFor(selector);
                        if (!cancelled && fd.isOpen() && (key == null || !key.isValid() || key.attachment() != h)) {
                            lost.add(fd + " key=" + (key == null ? "none" : key.isValid() ? "other handle's" : "cancelled"));
                        }
                    }
                    break;
                } catch (java.util.ConcurrentModificationException e) {
                    if (attempt == 10) {
                        throw e;
                    }
                }
            }
        }
        return lost;
    }

    @Test
    void aConnectionWhoseRegistrationWasLostCompletesAfterTheIoThreadIsNudged() throws Exception {
        byte[] ping = "ping".getBytes(StandardCharsets.UTF_8);
        int late = 0;
        int lost = 0;
        try (ZContext p = new ZContext(1); ZContext d = new ZContext(1)) {
            ZMQ.Socket router = p.createSocket(SocketType.ROUTER);
            router.setLinger(0);
            router.setReceiveTimeOut(2);
            int port = router.bindToRandomPort("tcp://127.0.0.1");
            for (int i = 0; i < CONNECTIONS; i++) {
                try (ZMQ.Socket dealer = d.createSocket(SocketType.DEALER)) {
                    dealer.setLinger(0);
                    dealer.setReceiveTimeOut(0);
                    dealer.connect("tcp://127.0.0.1:" + port);
                    dealer.send(ping);
                    long start = System.nanoTime();
                    long deadline = start + TimeUnit.SECONDS.toNanos(10);
                    boolean nudged = false;
                    byte[] answer;
                    while ((answer = dealer.recv()) == null) {
                        byte[] id = router.recv(); // echo on this thread: the ROUTER is never shared
                        if (id != null) {
                            byte[] msg = router.recv();
                            router.sendMore(id);
                            router.send(msg);
                        }
                        long now = System.nanoTime();
                        if (now - deadline > 0) {
                            fail("connection " + i + " got no reply within 10 s although its I/O thread was nudged");
                        }
                        if (!nudged && now - start > TimeUnit.MILLISECONDS.toNanos(PullChannels.NUDGE_AFTER_MS * 2)) {
                            late++;
                            List<String> l = lostRegistrations(dealer);
                            if (!l.isEmpty()) {
                                lost++;
                                LOG.info("connection {}: lost poller registration {}", i, l);
                            }
                            WorkerTestSupport.nudgeIoThread(d);
                            nudged = true;
                        }
                    }
                    assertArrayEquals(ping, answer);
                }
            }
        }
        LOG.info("{} connections: {} late, {} with a lost poller registration, all completed", CONNECTIONS, late, lost);
    }
}
