package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.WorkerTestSupport.await;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.worker.loop.HealthMonitor;
import io.mooncake4j.connector.worker.send.SenderListener;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.ConcurrentModificationException;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.ZContext;

/**
 * {@link PdTestbed.RawDealer}, the tests' independent ZMTP peer, against JeroMQ 0.6.0's lost poller
 * registration ({@link WorkerTestSupport#nudgeIoThread}) at a point the connect-time nudge cannot reach:
 * the dealer's connection is idle, waiting for P's answer, when its selector key is gone (cancelled here,
 * as the poller's swap of a connecter's handle for a stream engine's leaves it). Nothing else wakes that
 * I/O thread, so without the nudges of the receive the answer that arrives is never read: the receive
 * waited out its whole timeout while P had answered (P's counters said so), as SelfAimedPullTest once did.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RawDealerTest {

    @Test
    void anAnswerThatArrivesAfterTheDealersRegistrationWasLostIsStillRead() throws Exception {
        byte[] answer = MooncakeXferResponseCodec.encode(MooncakeXferResponse.error("answered"));
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger handled = new AtomicInteger();
        try (SenderListener l = new SenderListener("127.0.0.1", () -> (identity, frames, reply) -> {
                    handled.incrementAndGet();
                    release.await(30, TimeUnit.SECONDS); // P answers once the dealer's registration is lost
                    reply.send(answer);
                }, SideChannelLimits.DEFAULTS.channel(), new HealthMonitor(), () -> null, SenderListener.POLL_MS)) {
            int port = l.ready().get(20, TimeUnit.SECONDS);
            try (PdTestbed.RawDealer dealer = new PdTestbed.RawDealer(port, l::handshakes)
                    .explainTimeoutWith(() -> "P's listener: " + l.stats())) {
                dealer.send(new byte[] {1});
                await(() -> handled.get() == 1, "P received the message");
                // the dealer's I/O thread is idle once its key waits for reads alone (its write finished)
                SelectionKey key = awaitKey(dealer.context(), port);
                await(() -> key.isValid() && key.interestOps() == SelectionKey.OP_READ, "the dealer idle");
                key.cancel(); // lost: the I/O thread no longer hears of this connection
                release.countDown();
                assertEquals("answered", dealer.recv().errMsg());
                assertEquals(1, l.stats().answers().sent());
            }
        } finally {
            release.countDown();
        }
    }

    /** The key of the dealer's connection to {@code port} in one of its context's selectors. */
    private static SelectionKey awaitKey(ZContext ctx, int port) throws ReflectiveOperationException {
        List<Selector> selectors = selectors(ctx);
        SelectionKey[] found = new SelectionKey[1];
        await(() -> (found[0] = keyTo(selectors, port)) != null, "the dealer's selector key");
        return found[0];
    }

    private static SelectionKey keyTo(List<Selector> selectors, int port) {
        for (Selector s : selectors) {
            List<SelectionKey> keys;
            try {
                keys = new ArrayList<>(s.keys()); // read while the I/O thread may register: retried on a clash
            } catch (ConcurrentModificationException e) {
                return null;
            }
            for (SelectionKey k : keys) {
                if (k.channel() instanceof SocketChannel ch && ch.isConnected()) {
                    try {
                        if (((InetSocketAddress) ch.getRemoteAddress()).getPort() == port) {
                            return k;
                        }
                    } catch (java.io.IOException e) {
                        // closed meanwhile: not the one
                    }
                }
            }
        }
        return null;
    }

    /** JeroMQ's selectors of {@code ctx} (its I/O threads' among them), by reflection: it exposes none. */
    @SuppressWarnings("unchecked")
    private static List<Selector> selectors(ZContext ctx) throws ReflectiveOperationException {
        Object context = ctx.getContext();
        Field inner = context.getClass().getDeclaredField("ctx");
        inner.setAccessible(true);
        Object zmqCtx = inner.get(context);
        Field list = zmqCtx.getClass().getDeclaredField("selectors");
        list.setAccessible(true);
        return new ArrayList<>((List<Selector>) list.get(zmqCtx));
    }
}
