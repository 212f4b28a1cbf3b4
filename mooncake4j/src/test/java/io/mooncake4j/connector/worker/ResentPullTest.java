package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.blocks;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.metadataFor;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A D whose side-channel connection is cut after P received its pull (a proxy in between, as a
 * reset by P or by a middlebox would) sends the pull again on a new connection, and P answers the
 * re-sent pull without writing D's blocks twice: it follows a transfer still being written, answers
 * one it finished from memory, and says clearly when it no longer knows the outcome.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ResentPullTest {

    private static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void aPullWhoseConnectionIsCutWhileItsWriteRunsGetsItsAnswerThroughTheResendAndIsWrittenOnce() throws Exception {
        CountDownLatch firstWriteStarted = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30));
                MooncakeBootstrapServer boot = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            bed.engines(() -> new ScriptedTransferEngine().copyData(true).beforeEach(call -> {
                if (call.method() == EngineMethod.BATCH_TRANSFER_SYNC_WRITE && firstWriteStarted.getCount() > 0) {
                    firstWriteStarted.countDown();
                    try {
                        release.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }));
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            try (CuttingProxy proxy = new CuttingProxy(p.worker.sideChannelPort())) {
                boot.start();
                try (BootstrapClient c = new BootstrapClient()) {
                    c.register("http://127.0.0.1:" + boot.port(),
                            new RegisterWorkerPayload("P", 0, 0, 0, "tcp://127.0.0.1:" + proxy.port()),
                            Duration.ofSeconds(20));
                }
                p.fill(1, 2);
                p.step(announce("p1", "X1"));
                p.step(finished("p1", "X1", 1));
                d.step(pull("d1", "X1", "P", "http://127.0.0.1:" + boot.port(), 5));
                assertTrue(firstWriteStarted.await(60, TimeUnit.SECONDS), "P started writing d1");
                assertEquals(1, proxy.cutAll(), "D's connection was cut while P wrote");
                bed.awaitAll(() -> p.worker.diagnostics().retriesFollowed() == 1, WAIT,
                        "P received the re-sent pull and let it follow the first");
                release.countDown();
                bed.awaitAll(() -> d.finishedRecving.contains("d1"), WAIT, "D got d1's answer through the re-send");
                assertTrue(d.blocksWithLoadErrors.isEmpty(), "no failed load: " + d.blocksWithLoadErrors);
                assertTrue(d.failedRecving.isEmpty(), "no failed load: " + d.failedRecving);
                PdTestbed.assertSameTpCopy(p, 1, d, 5);
                assertEquals(1, p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE), "d1 written once");
                assertEquals(1, d.worker.diagnostics().pullsResent());
                assertEquals(2, proxy.accepted.get(), "the re-send came on a new connection");
                bed.awaitAll(() -> p.finishedSending.contains("p1"), WAIT, "P freed p1's blocks");
            }
        } finally {
            release.countDown();
        }
    }

    @Test
    void aPullSentAgainAfterItsAnswerIsAnsweredFromMemoryAndThenClearlyRefusedButNeverWrittenAgain()
            throws Exception {
        AtomicLong clock = new AtomicLong();
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(1, 2);
            p.step(announce("p1", "X1"));
            p.step(finished("p1", "X1", 1));
            var meta = metadataFor(d, Map.of("d1", blocks("X1", 5)));
            try (PdTestbed.RawDealer first = PdTestbed.RawDealer.to(p)) {
                first.send(meta);
                MooncakeXferResponse r = first.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d1"), r.okReqs());
            }
            PdTestbed.assertSameTpCopy(p, 1, d, 5);
            try (PdTestbed.RawDealer again = PdTestbed.RawDealer.to(p)) {
                again.send(meta);
                MooncakeXferResponse r = again.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d1"), r.okReqs(), "answered again from what P remembers");
            }
            assertEquals(1, p.worker.diagnostics().retriesAnsweredAgain());
            clock.addAndGet(TimeUnit.SECONDS.toNanos(31)); // past the abort timeout: the outcome is forgotten
            try (PdTestbed.RawDealer late = PdTestbed.RawDealer.to(p)) {
                late.send(meta);
                MooncakeXferResponse r = late.recv();
                assertEquals(MooncakeXferResponseStatus.FINISH, r.status());
                assertEquals(List.of("d1"), r.errReqs());
                assertTrue(r.errMsg().contains("no longer knows the outcome"), r.errMsg());
            }
            assertEquals(1, p.worker.diagnostics().retriesForgotten());
            assertEquals(1, p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE), "written once, never again");
            assertEquals(0, p.worker.diagnostics().pendingTransfers(), "nothing left waiting at P");
        }
    }

    /** A TCP proxy to P's side channel whose connections the test can reset. */
    private static final class CuttingProxy implements AutoCloseable {
        private final ServerSocket server;
        private final int target;
        private final List<Socket[]> pairs = new CopyOnWriteArrayList<>();
        private final List<Thread> threads = new CopyOnWriteArrayList<>();
        final AtomicInteger accepted = new AtomicInteger();

        CuttingProxy(int target) throws IOException {
            this.target = target;
            this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            start(this::acceptLoop);
        }

        int port() {
            return server.getLocalPort();
        }

        private void start(Runnable r) {
            Thread t = Thread.ofPlatform().daemon().name("test-proxy").start(r);
            threads.add(t);
        }

        private void acceptLoop() {
            while (!server.isClosed()) {
                try {
                    Socket from = server.accept();
                    Socket to = new Socket();
                    to.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), target), 20_000);
                    accepted.incrementAndGet();
                    pairs.add(new Socket[] {from, to});
                    start(() -> pump(from, to));
                    start(() -> pump(to, from));
                } catch (IOException e) {
                    return; // closed
                }
            }
        }

        private static void pump(Socket in, Socket out) {
            byte[] buf = new byte[64 * 1024];
            try (InputStream i = in.getInputStream(); OutputStream o = out.getOutputStream()) {
                int n;
                while ((n = i.read(buf)) >= 0) {
                    o.write(buf, 0, n);
                    o.flush();
                }
            } catch (IOException e) {
                // cut or closed: the other pump ends too
            } finally {
                closeQuietly(in);
                closeQuietly(out);
            }
        }

        /** Resets every connection open now (RST to both ends); returns how many. */
        int cutAll() {
            int n = 0;
            for (Socket[] pair : pairs) {
                pairs.remove(pair);
                for (Socket s : pair) {
                    try {
                        s.setSoLinger(true, 0);
                    } catch (IOException e) {
                        // closed already
                    }
                    closeQuietly(s);
                }
                n++;
            }
            return n;
        }

        private static void closeQuietly(Socket s) {
            try {
                s.close();
            } catch (IOException e) {
                // closing: nothing to do
            }
        }

        @Override
        public void close() throws Exception {
            server.close();
            cutAll();
            for (Thread t : threads) {
                t.join(10_000);
            }
        }
    }
}
